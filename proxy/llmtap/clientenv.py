"""The environment a client process needs to send its calls through the sidecar.

One place for the variables each runtime reads: the proxy (``HTTPS_PROXY``/``HTTP_PROXY`` in
both cases, the service in the proxy URL's user) and the CA bundle (system roots + the llmtap
CA) under every name a runtime looks for it — Python's ``ssl``/httpx (``SSL_CERT_FILE``),
requests (``REQUESTS_CA_BUNDLE``), curl (``CURL_CA_BUNDLE``), Node (``NODE_EXTRA_CA_CERTS``,
and ``NODE_USE_ENV_PROXY=1``: Node 24+ only honours the proxy variables with it), the AWS SDKs
(``AWS_CA_BUNDLE``) and git (``GIT_SSL_CAINFO``). Used by ``llmtap exec``.

The proxy URL carries the service as its user and a placeholder password
(``http://SERVICE:x@127.0.0.1:8080``): some clients drop a user that has no password. The
sidecar reads the user as the calls' ``service`` and ignores the password unless it runs with
``--proxy-auth``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

CA_VARIABLES = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "AWS_CA_BUNDLE",
    "GIT_SSL_CAINFO",
)
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
LOOPBACK = ("localhost", "127.0.0.1", "::1")


def proxy_url(host: str, port: int, service: str = "", password: str = "x") -> str:
    """``http://[SERVICE:PASSWORD@]HOST:PORT`` (user and password percent-encoded)."""
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if service:
        netloc = f"{quote(service, safe='')}:{quote(password or 'x', safe='')}@{netloc}"
    return f"http://{netloc}"


def client_env(proxy: str, bundle: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables to set for a client (``base``: the environment they are added to; its
    ``NO_PROXY`` is kept and gains the loopback names, so local servers are reached directly)."""
    env: dict[str, str] = {name: proxy for name in PROXY_VARIABLES}
    env.update({name: str(bundle) for name in CA_VARIABLES})
    env["NODE_USE_ENV_PROXY"] = "1"
    base = base or {}
    no_proxy = [x.strip() for x in (base.get("NO_PROXY") or base.get("no_proxy") or "").split(",") if x.strip()]
    no_proxy += [name for name in LOOPBACK if name not in no_proxy]
    env["NO_PROXY"] = env["no_proxy"] = ",".join(no_proxy)
    return env
