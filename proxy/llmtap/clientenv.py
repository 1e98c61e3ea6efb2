"""What a client process needs in its environment to go through the sidecar, per runtime: one place,
used by ``llmtap env`` and ``llmtap exec``.

Most runtimes read ``HTTPS_PROXY`` and a CA bundle variable (Python: ``SSL_CERT_FILE`` /
``REQUESTS_CA_BUNDLE``; curl: ``CURL_CA_BUNDLE``; Go: ``SSL_CERT_FILE``; the AWS SDKs: ``AWS_CA_BUNDLE``;
git: ``GIT_SSL_CAINFO``; Node: ``NODE_EXTRA_CA_CERTS``). Node is the exception for the proxy: its
``fetch`` (what the official ``openai`` and ``@anthropic-ai/sdk`` packages use) ignores ``HTTPS_PROXY``
unless ``NODE_USE_ENV_PROXY=1``, and only Node >= 24 (and a 22.x whose ``--help`` lists
``--use-env-proxy``, the backport) understand that. Older Node needs a preload (:data:`NODE_PRELOAD`: undici's
``EnvHttpProxyAgent`` as the global dispatcher, through ``NODE_OPTIONS=--require``), or base-URL mode.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

NODE_PRELOAD = Path(__file__).parent / "clients" / "node-proxy-preload.cjs"
CA_BUNDLE_VARS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "AWS_CA_BUNDLE", "GIT_SSL_CAINFO")
CA_VARIABLES = (*CA_BUNDLE_VARS, "NODE_EXTRA_CA_CERTS")
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
LOOPBACK = ("localhost", "127.0.0.1", "::1")
BASE_URLS = {"OPENAI_BASE_URL": "/openai/v1", "ANTHROPIC_BASE_URL": "/anthropic"}


@dataclass(frozen=True)
class Var:
    name: str
    value: str
    note: str = ""


@dataclass(frozen=True)
class Node:
    version: str  # "20.20.2"
    env_proxy: bool  # NODE_USE_ENV_PROXY=1 makes its fetch honour HTTPS_PROXY

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def node_honours_env_proxy(version: str, help_text: str) -> bool:
    """Node >= 24 reads NODE_USE_ENV_PROXY; a 22.x that lists ``--use-env-proxy`` got the backport."""
    m = re.match(r"v?(\d+)\.", version)
    return bool(m and int(m.group(1)) >= 24) or "--use-env-proxy" in help_text


def detect_node(executable: str = "node") -> Node | None:
    """The Node on PATH, or None (not installed, or it does not answer)."""
    path = shutil.which(executable)
    if path is None:
        return None
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        help_text = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if not re.match(r"v\d+\.\d+\.\d+", version):
        return None
    return Node(version.lstrip("v"), node_honours_env_proxy(version, help_text))


def client_env(proxy_url: str, bundle: Path, node: Node | None, *, http_proxy: bool = False) -> list[Var]:
    """The variables, in order. ``node``: the Node the client runs on (None: unknown, so both ways are set:
    ``NODE_USE_ENV_PROXY`` for a new Node and the preload for an old one; the preload does nothing where
    Node honours the variable itself). ``http_proxy``: also route plain-HTTP traffic (``HTTP_PROXY``)."""
    out = [Var("HTTPS_PROXY", proxy_url), Var("https_proxy", proxy_url)]
    if http_proxy:
        out += [Var("HTTP_PROXY", proxy_url), Var("http_proxy", proxy_url)]
    out += [Var(name, str(bundle)) for name in CA_BUNDLE_VARS]
    out.append(Var("NODE_EXTRA_CA_CERTS", str(bundle)))
    out.append(
        Var("NODE_USE_ENV_PROXY", "1", "Node >= 24 (or one whose --help lists --use-env-proxy): fetch uses HTTPS_PROXY")
    )
    if node is None or not node.env_proxy:
        which = f"Node {node.version}" if node else "Node < 24"
        out.append(
            Var(
                "NODE_OPTIONS",
                f'--require "{NODE_PRELOAD}"',
                f"{which} ignores HTTPS_PROXY in fetch: this preload routes it (needs `npm i undici` in the app; "
                "or use base-URL mode)",
            )
        )
    return out


def base_url_env(host: str, port: int) -> list[Var]:
    """Base-URL mode: no proxy and no CA; the SDKs talk plain HTTP to the sidecar, which forwards over TLS."""
    return [Var(name, f"http://{host}:{port}{prefix}") for name, prefix in BASE_URLS.items()]


def shell_exports(variables: list[Var]) -> list[str]:
    """``export NAME='value'`` lines for ``eval "$(llmtap env)"``; notes become comment lines above them.
    ``NODE_OPTIONS`` keeps what the shell already has."""
    lines: list[str] = []
    for v in variables:
        if v.note:
            lines.append(f"# {v.note}")
        value = v.value.replace("'", "'\\''")
        if v.name == "NODE_OPTIONS":
            lines.append(f"export NODE_OPTIONS=\"${{NODE_OPTIONS:+$NODE_OPTIONS }}\"'{value}'")
        else:
            lines.append(f"export {v.name}='{value}'")
    return lines


def proxy_url(host: str, port: int, service: str = "", password: str = "x") -> str:
    """``http://[SERVICE:PASSWORD@]HOST:PORT`` (user and password percent-encoded). The service rides in the
    proxy URL's user with a placeholder password (some clients drop a user that has no password); the sidecar
    reads the user as the calls' ``service`` and ignores the password unless it runs with ``--proxy-auth``."""
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if service:
        netloc = f"{quote(service, safe='')}:{quote(password or 'x', safe='')}@{netloc}"
    return f"http://{netloc}"


def exec_env(
    proxy: str, bundle: Path, base: Mapping[str, str] | None = None, node: Node | None = None
) -> dict[str, str]:
    """The variables ``llmtap exec`` sets for its program: :func:`client_env` for both proxy schemes, and
    ``NO_PROXY`` — ``base``'s (the environment they are added to) kept, plus the loopback names, so local
    servers are reached directly. ``NODE_OPTIONS`` keeps what ``base`` has and gains the preload for a Node that
    needs it."""
    base = base or {}
    env: dict[str, str] = {}
    for v in client_env(proxy, bundle, node, http_proxy=True):
        if v.name == "NODE_OPTIONS" and base.get("NODE_OPTIONS"):
            env[v.name] = f"{base['NODE_OPTIONS']} {v.value}"
        else:
            env[v.name] = v.value
    no_proxy = [x.strip() for x in (base.get("NO_PROXY") or base.get("no_proxy") or "").split(",") if x.strip()]
    no_proxy += [name for name in LOOPBACK if name not in no_proxy]
    env["NO_PROXY"] = env["no_proxy"] = ",".join(no_proxy)
    return env
