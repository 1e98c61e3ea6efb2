"""Which hosts are LLM providers, and which wire API a request speaks.

The host table is the single list of built-in intercepted hosts: it feeds both
mitmproxy's ``allow_hosts`` (so every other host is tunnelled, never decrypted)
and the ``provider`` column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .adapters import ADAPTERS, Adapter


@dataclass(frozen=True, slots=True)
class HostRule:
    pattern: str  # regex over the lower-case host name (no port)
    provider: str


HOSTS: tuple[HostRule, ...] = (
    HostRule(r"api\.openai\.com", "openai"),
    HostRule(r"[a-z0-9-]+\.openai\.azure\.com", "azure.ai.openai"),
    HostRule(r"[a-z0-9-]+\.services\.ai\.azure\.com", "azure.ai.openai"),
    HostRule(r"[a-z0-9-]+\.cognitiveservices\.azure\.com", "azure.ai.openai"),
    HostRule(r"api\.anthropic\.com", "anthropic"),
    HostRule(r"generativelanguage\.googleapis\.com", "gcp.gemini"),
    HostRule(r"([a-z0-9-]+-)?aiplatform\.googleapis\.com", "gcp.vertex_ai"),
    HostRule(r"bedrock-runtime(-fips)?\.[a-z0-9-]+\.amazonaws\.com", "aws.bedrock"),
    HostRule(r"bedrock-mantle\.[a-z0-9-]+\.api\.aws", "aws.bedrock"),
    HostRule(r"openrouter\.ai", "openrouter"),
    HostRule(r"api\.groq\.com", "groq"),
    HostRule(r"api\.deepseek\.com", "deepseek"),
    HostRule(r"api\.mistral\.ai", "mistral_ai"),
    HostRule(r"api\.x\.ai", "x_ai"),
)
_HOST_RES = tuple((re.compile(rf"^{r.pattern}$"), r.provider) for r in HOSTS)


def provider_for_host(host: str) -> str | None:
    h = host.lower().rstrip(".")
    for rx, provider in _HOST_RES:
        if rx.match(h):
            return provider
    return None


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
    pats = [rf"^{r.pattern}:443$" for r in HOSTS]
    for spec in extra:
        host, port = parse_host_port(spec)
        pats.append(rf"^{re.escape(host)}:{port if port else r'\d+'}$")
    return pats


def api_for_request(method: str, path: str, provider: str | None, headers_lower: set[str]) -> str | None:
    """The wire API of a request from its path, or ``None`` when it is not an LLM call."""
    if method != "POST":
        return None
    p = path.split("?", 1)[0].rstrip("/").lower()
    if p.endswith("/chat/completions"):
        return "openai.chat_completions"
    if p.endswith("/responses"):
        return "openai.responses"
    if p.endswith("/completions"):
        return "openai.completions"
    if p.endswith("/embeddings"):
        return "openai.embeddings"
    if p.endswith("/messages") and (
        provider == "anthropic"
        or "anthropic-version" in headers_lower
        or "x-api-key" in headers_lower
        or provider is None
    ):
        return "anthropic.messages"
    return None


def adapter_for(api: str) -> Adapter:
    return ADAPTERS[api]()


def provider_for_call(host: str, api: str) -> str:
    """Provider from the public host; self-hosted endpoints fall back on the API family."""
    known = provider_for_host(host)
    if known:
        return known
    if api.startswith("anthropic."):
        return "anthropic"
    return "openai_compatible"
