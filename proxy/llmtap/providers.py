"""Which hosts are LLM providers, and which wire API a request speaks.

The host table is the single list of built-in intercepted hosts: it feeds both
mitmproxy's ``allow_hosts`` (so every other host is tunnelled, never decrypted)
and the ``provider`` column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

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
    p = unquote(path.split("?", 1)[0]).rstrip("/").lower()
    if p.endswith((":generatecontent", ":streamgeneratecontent")):
        return "gemini.generate_content"
    if provider == "gcp.vertex_ai" and p.endswith((":rawpredict", ":streamrawpredict")) and "/anthropic/" in p:
        return "anthropic.messages"
    if re.search(r"/model/[^/]+/(converse|converse-stream)$", p):
        return "bedrock.converse"
    if re.search(r"/model/[^/]+/(invoke|invoke-with-response-stream)$", p):
        return "bedrock.invoke"
    if p.endswith("/api/chat"):
        return "ollama.chat"
    if p.endswith("/api/generate"):
        return "ollama.generate"
    if p.endswith("/chat/completions"):
        return "openai.chat_completions"
    if p.endswith("/responses"):
        return "openai.responses"
    if p.endswith("/completions"):
        return "openai.completions"
    if p.endswith("/embeddings"):
        return "openai.embeddings"
    if p.endswith("/messages") and (
        provider in ("anthropic", "aws.bedrock", None)
        or "anthropic-version" in headers_lower
        or "x-api-key" in headers_lower
    ):
        return "anthropic.messages"
    return None


_MODEL_IN_PATH = (
    re.compile(r"/models/([^/:]+)(?::|$)"),  # Gemini / Vertex: .../models/gemini-2.0-flash:generateContent
    re.compile(r"/deployments/([^/]+)/"),  # Azure: /openai/deployments/{deployment}/chat/completions
    re.compile(r"/model/([^/]+)/"),  # Bedrock: /model/{modelId}/converse-stream
)


def model_from_path(path: str) -> str:
    p = unquote(path.split("?", 1)[0])
    for rx in _MODEL_IN_PATH:
        m = rx.search(p)
        if m:
            return m.group(1)
    return ""


def adapter_for(api: str) -> Adapter:
    return ADAPTERS[api]()


def provider_for_call(host: str, api: str) -> str:
    """Provider from the public host; self-hosted endpoints (``--intercept``) from the API they speak."""
    known = provider_for_host(host)
    if known:
        return known
    if api.startswith("ollama."):
        return "ollama"
    if api.startswith("anthropic."):
        return "anthropic"
    if api.startswith("gemini."):
        return "gcp.gemini"
    if api.startswith("bedrock."):
        return "aws.bedrock"
    return "openai_compatible"


# Base-URL mode: a client that cannot trust a CA points its SDK at http://<sidecar>/<prefix>/...
# and llmtap forwards over TLS to the provider. Only these upstreams (and --intercept hosts via
# /upstream/<host>/...) are reachable this way: the sidecar is not an open relay.
BASE_URL_PREFIXES: dict[str, str] = {
    "openai": "api.openai.com",
    "anthropic": "api.anthropic.com",
    "gemini": "generativelanguage.googleapis.com",
    "vertex": "aiplatform.googleapis.com",
    "openrouter": "openrouter.ai",
    "groq": "api.groq.com",
    "deepseek": "api.deepseek.com",
    "mistral": "api.mistral.ai",
    "xai": "api.x.ai",
}


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
        resource, _, tail = parts[2], "", parts[3]
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
