"""Which connections llmtap decrypts, and where a base-URL-mode request goes.

Interception is an allow-list: the built-in provider hosts (:mod:`llmtap.providers`) plus
``--intercept`` hosts. Everything else is tunnelled, never decrypted. Which wire API a
decrypted request speaks is the adapters' business (:func:`llmtap.adapters.route`).
"""

from __future__ import annotations

import re

from ..providers import base_url_prefixes, host_patterns


def parse_host_port(spec: str, default_port: int | None = None) -> tuple[str, int | None]:
    """``host``, ``host:port`` or ``[v6]:port`` → (host, port)."""
    spec = spec.strip()
    if not spec:
        raise ValueError("empty host")
    if spec.startswith("["):
        host, _, rest = spec[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif spec.count(":") == 1:
        host, port = spec.split(":")
    else:
        host, port = spec, ""
    if port and not port.isdigit():
        raise ValueError(f"invalid port in {spec!r}")
    return host.lower(), int(port) if port else default_port


def allow_host_patterns(extra: list[str]) -> list[str]:
    """Regexes for mitmproxy's ``allow_hosts`` (matched against ``host:port``)."""
    pats = host_patterns()
    for spec in extra:
        host, port = parse_host_port(spec)
        pats.append(rf"^{re.escape(host)}:{port if port else r'\d+'}$")
    return pats


def call_host(mode: str, host: str, sni: str | None, host_header: str | None) -> str:
    """The name a request was addressed to. In regular mode it is the request's host (the CONNECT target or
    the absolute URL). In transparent and local mode the request's host is the original destination's IP
    address: the name is the TLS server name (SNI: mitmproxy verifies the upstream certificate against it, as
    it does the CONNECT host) or, over plain HTTP, the Host header."""
    if mode == "regular":
        return host
    if sni:
        return sni.lower()
    if host_header:
        return parse_host_port(host_header)[0] if not host_header.startswith(":") else host
    return host


class Interception:
    """The allow-list as a predicate, for requests that reach the addon over plain HTTP."""

    def __init__(self, extra: list[str]) -> None:
        self._rx = [re.compile(p, re.IGNORECASE) for p in allow_host_patterns(extra)]

    def __call__(self, host: str, port: int) -> bool:
        hp = f"{host}:{port}"
        return any(rx.match(hp) for rx in self._rx)


# Base-URL mode: a client that cannot trust a CA points its SDK at http://<sidecar>/<prefix>/...
# and llmtap forwards over TLS to the provider. Only these upstreams (and --intercept hosts via
# /upstream/<host>/...) are reachable this way: the sidecar is not an open relay.
BASE_URL_PREFIXES: dict[str, str] = base_url_prefixes()
BASE_URL_HELP = (
    b"llmtap: no such base-URL route; use "
    + b", ".join(f"/{p}/...".encode() for p in BASE_URL_PREFIXES)
    + b", /azure/<resource>/..., or /upstream/<--intercept host>/...\n"
)


def base_url_target(path: str, intercept: list[str]) -> tuple[str, int, str] | None:
    """``/openai/v1/chat/completions`` → ("api.openai.com", 443, "/v1/chat/completions"); None if not a route."""
    parts = path.split("/", 3)  # "", prefix, rest...
    if len(parts) < 3:
        return None
    prefix = parts[1].lower()
    rest = "/" + "/".join(parts[2:])
    if prefix in BASE_URL_PREFIXES:
        return BASE_URL_PREFIXES[prefix], 443, rest
    if prefix == "azure" and len(parts) == 4:  # /azure/{resource}/openai/deployments/...
        resource, tail = parts[2], parts[3]
        if re.fullmatch(r"[a-z0-9-]+", resource.lower()):
            return f"{resource.lower()}.openai.azure.com", 443, "/" + tail
    if prefix == "upstream" and len(parts) == 4:  # /upstream/{host[:port]}/... for --intercept hosts only
        try:
            host, port = parse_host_port(parts[2])
        except ValueError:
            return None
        for spec in intercept:
            ihost, iport = parse_host_port(spec)
            if ihost == host and (iport is None or iport == (port or 443)):
                return host, port or 443, "/" + parts[3]
    return None
