"""What a client process needs in its environment to go through the sidecar, per runtime: one place,
used by ``llmtap env`` (and by ``llmtap exec``).

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
from dataclasses import dataclass
from pathlib import Path

NODE_PRELOAD = Path(__file__).parent / "clients" / "node-proxy-preload.cjs"
CA_BUNDLE_VARS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "AWS_CA_BUNDLE", "GIT_SSL_CAINFO")
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
