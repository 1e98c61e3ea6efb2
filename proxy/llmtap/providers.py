"""The providers llmtap knows: one table, read by interception, routing, base-URL mode and pricing.

A provider here is who serves the call (the ``provider`` column), not the wire API it speaks:
Groq, DeepSeek, Mistral, xAI and OpenRouter all speak OpenAI Chat Completions (the adapters
in :mod:`llmtap.adapters` know the APIs). The ``hosts`` are the public endpoints intercepted
by default: they feed mitmproxy's ``allow_hosts``, so every other host is tunnelled, never
decrypted.

Coding agents also talk to plan endpoints on hosts that serve much more than an LLM API
(``chatgpt.com`` is the ChatGPT web app): such an entry names the ``paths`` that are calls, and
every other request to the host passes through untouched and unrecorded (mitmproxy's
``allow_hosts`` decides per host, so the host itself is decrypted). ``plan`` marks endpoints
only a subscription reaches (``billing = subscription``).

A host pattern that is not a plain name (``[a-z0-9-]+.openai.azure.com``) comes with an
``examples`` host that it matches: the mock provider answers for every plain name and example
(:func:`known_hosts`), so a provider added here is served by the mock without another list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

# The ``provider`` vocabulary: one name per row of PROVIDERS below (mypy checks each row's name is one of
# these; tests/unit/test_registries.py that each of these has a row). docs/providers.md lists them,
# generated from the table (python -m llmtap.store.reference).
ProviderName = Literal[
    "openai",
    "azure.ai.openai",
    "anthropic",
    "gcp.gemini",
    "gcp.vertex_ai",
    "aws.bedrock",
    "openrouter",
    "groq",
    "deepseek",
    "mistral_ai",
    "x_ai",
    "github_copilot",
    "ollama",
    "vllm",
    "openai_compatible",
]
PROVIDER_NAMES: tuple[ProviderName, ...] = get_args(ProviderName)


@dataclass(frozen=True, slots=True)
class Provider:
    name: ProviderName  # llm_calls.provider
    hosts: tuple[str, ...] = ()  # regexes over the lower-case host name (no port)
    genai_prices_id: str | None = None  # the provider's id in genai-prices (None: see by_model, self_hosted)
    base_url_prefix: str = ""  # base-URL mode: http://<sidecar>/<prefix>/... → https://<base_url_host>/...
    base_url_host: str = ""
    paths: tuple[str, ...] = ()  # when set: only paths matching one of these regexes are calls
    plan: bool = False  # a plan-only endpoint: its calls are billed to a subscription
    by_model: bool = False  # priced by the model name alone, at its API list price (resellers, gateways)
    self_hosted: bool = False  # a server of one's own: no list price (price files only)
    examples: tuple[str, ...] = ()  # a real host name for each pattern of ``hosts`` that is not a plain name
    note: str = ""  # for docs/providers.md


PROVIDERS: tuple[Provider, ...] = (
    Provider("openai", (r"api\.openai\.com",), "openai", "openai", "api.openai.com"),
    Provider(
        "azure.ai.openai",
        (
            r"[a-z0-9-]+\.openai\.azure\.com",
            r"[a-z0-9-]+\.services\.ai\.azure\.com",
            r"[a-z0-9-]+\.cognitiveservices\.azure\.com",
        ),
        "azure",
        examples=("myres.openai.azure.com", "myres.services.ai.azure.com", "myres.cognitiveservices.azure.com"),
    ),
    Provider("anthropic", (r"api\.anthropic\.com",), "anthropic", "anthropic", "api.anthropic.com"),
    Provider(
        "gcp.gemini",
        (r"generativelanguage\.googleapis\.com",),
        "google",
        "gemini",
        "generativelanguage.googleapis.com",
    ),
    Provider(
        "gcp.vertex_ai",
        (r"([a-z0-9-]+-)?aiplatform\.googleapis\.com",),
        "google",
        "vertex",
        "aiplatform.googleapis.com",
        examples=("us-central1-aiplatform.googleapis.com", "aiplatform.googleapis.com"),
    ),
    Provider(
        "aws.bedrock",
        (r"bedrock-runtime(-fips)?\.[a-z0-9-]+\.amazonaws\.com", r"bedrock-mantle\.[a-z0-9-]+\.api\.aws"),
        "aws",
        examples=("bedrock-runtime.us-east-1.amazonaws.com", "bedrock-mantle.us-east-1.api.aws"),
    ),
    Provider("openrouter", (r"openrouter\.ai",), "openrouter", "openrouter", "openrouter.ai"),
    Provider("groq", (r"api\.groq\.com",), "groq", "groq", "api.groq.com"),
    Provider("deepseek", (r"api\.deepseek\.com",), "deepseek", "deepseek", "api.deepseek.com"),
    Provider("mistral_ai", (r"api\.mistral\.ai",), "mistral", "mistral", "api.mistral.ai"),
    Provider("x_ai", (r"api\.x\.ai",), "x-ai", "xai", "api.x.ai"),
    # Copilot serves OpenAI, Anthropic and Google models on a plan: its calls are priced at the
    # model's API list price (genai-prices' github-copilot entries are the plan's, $0 for most).
    Provider(
        "github_copilot",
        (r"api\.githubcopilot\.com", r"api\.[a-z0-9-]+\.githubcopilot\.com"),
        plan=True,
        by_model=True,
        examples=("api.individual.githubcopilot.com",),
    ),
    # Coding-agent plan endpoints on hosts that serve more than the API (see the module doc).
    Provider("openai", (r"chatgpt\.com",), "openai", paths=(r"^/backend-api/codex/responses$",), plan=True),
    Provider(
        "gcp.gemini",
        (r"cloudcode-pa\.googleapis\.com",),
        "google",
        paths=(r"^/v1internal:(stream)?generatecontent$",),
        plan=True,
    ),
    # Self-hosted servers (reached with --intercept): named by the API they speak.
    Provider("ollama", self_hosted=True, note="Ollama's native API (`/api/chat`, `/api/generate`)"),
    Provider("vllm", self_hosted=True, note="a name for price files: calls to a vLLM server are `openai_compatible`"),
    # Any other host reached with --intercept (a gateway, a proxy): priced by the model it answers with.
    Provider("openai_compatible", by_model=True, note="the OpenAI APIs on other hosts (vLLM, Ollama `/v1`, gateways)"),
)
# Requests on intercepted hosts that are not model calls (the contract's "Which rows are LLM calls"): the
# agents' telemetry and event logging, feature flags, OAuth and account endpoints, token counts, file uploads.
# Each is recorded as an other request (``api = ''``, ``operation = 'other'``: no usage, no estimate, no cost),
# whatever adapter's path it looks like, and counted apart (``llmtap_other_requests_total``). Regexes searched
# case-insensitively in the path (no query, no trailing ``/``) of a POST to any intercepted host; a GET (a model
# listing, ``/v1/models``) is no call anyway. Provenance: Claude Code 2.1's requests seen under ``llmtap exec``
# (issue #31: ``/api/event_logging/v2/batch``, ``/api/eval/sdk-…``), the providers' API references for the rest.
NOT_CALL_PATHS: tuple[tuple[str, str], ...] = (
    (r"^/api/event_logging/", "Claude Code event logging"),
    (r"^/api/eval/", "Claude Code feature flags (GrowthBook SDK evaluation)"),
    (r"^/api/oauth/", "Anthropic OAuth (plan tokens)"),
    (r"^/api/claude_code[_/]", "Claude Code metrics, settings, shared transcripts"),
    (r"^/api/claude_cli/", "Claude Code bootstrap"),
    (r"^/v1/oauth/", "Anthropic OAuth token exchange"),
    (r"^/api/claude_cli_feedback$", "Claude Code feedback"),
    (r"^/api/hello$", "Claude Code connectivity check"),
    (r"^/v1/messages/count_tokens$", "Anthropic token counting (free, no generation)"),
    (r"^/v1/files$", "file uploads (Anthropic, OpenAI)"),
    (r"^/v1/uploads(/|$)", "OpenAI multi-part uploads"),
    (r":counttokens$", "Gemini / Vertex token counting"),
    (r"^/upload/", "Gemini file uploads"),
)
_NOT_CALL_RES: tuple[re.Pattern[str], ...] = tuple(re.compile(x, re.IGNORECASE) for x, _ in NOT_CALL_PATHS)
BY_NAME: dict[str, Provider] = {}
for _p in PROVIDERS:
    BY_NAME.setdefault(_p.name, _p)  # the first entry of a name is the provider's API host
_HOST_RES: tuple[tuple[re.Pattern[str], Provider], ...] = tuple(
    (re.compile(rf"^{pattern}$"), p) for p in PROVIDERS for pattern in p.hosts
)
_PATH_RES: dict[Provider, tuple[re.Pattern[str], ...]] = {
    p: tuple(re.compile(x, re.IGNORECASE) for x in p.paths) for p in PROVIDERS if p.paths
}


def endpoint_for_host(host: str) -> Provider | None:
    """The table entry serving ``host``, or ``None`` (a self-hosted or unknown host)."""
    h = host.lower().rstrip(".")
    for rx, p in _HOST_RES:
        if rx.match(h):
            return p
    return None


def provider_for_host(host: str) -> ProviderName | None:
    """The provider whose public endpoint ``host`` is, or ``None`` (a self-hosted or unknown host)."""
    p = endpoint_for_host(host)
    return p.name if p is not None else None


def is_call_path(host: str, path: str) -> bool:
    """False for a request to a path-limited host (``chatgpt.com``) outside its API paths: such a
    request is not an LLM call and passes through untouched. ``path`` may carry a query."""
    p = endpoint_for_host(host)
    if p is None or not p.paths:
        return True
    bare = path.split("?", 1)[0].rstrip("/")
    return any(rx.search(bare) for rx in _PATH_RES[p])


def is_not_call(path: str) -> bool:
    """A request path that is never a model call (:data:`NOT_CALL_PATHS`); ``path`` may carry a query."""
    bare = path.split("?", 1)[0].rstrip("/")
    return any(rx.search(bare) for rx in _NOT_CALL_RES)


def is_plan_endpoint(host: str) -> bool:
    """Calls to ``host`` are billed to a plan (Copilot, ChatGPT-plan Codex, Gemini Code Assist)."""
    p = endpoint_for_host(host)
    return p is not None and p.plan


def plain_name(pattern: str) -> str | None:
    """The host a pattern names when it is a plain name (escaped dots only), else None."""
    name = pattern.replace(r"\.", ".")
    return None if re.search(r"[\\\[\](){}?*+|^$]", name) else name


def known_hosts() -> list[str]:
    """A real host name for every host pattern, in table order: the plain names and the examples."""
    out: list[str] = []
    for p in PROVIDERS:
        for name in [*filter(None, map(plain_name, p.hosts)), *p.examples]:
            if name not in out:
                out.append(name)
    return out


def host_patterns() -> list[str]:
    """Regexes for mitmproxy's ``allow_hosts`` (matched against ``host:port``): every built-in host on 443."""
    return [rf"^{pattern}:443$" for p in PROVIDERS for pattern in p.hosts]


def genai_prices_id(provider: str) -> str | None:
    p = BY_NAME.get(provider)
    return p.genai_prices_id if p is not None else None


def priced_by_model(provider: str) -> bool:
    """The provider's calls are priced by the model name alone (at that model's API list price):
    resellers, gateways, and providers llmtap does not know."""
    p = BY_NAME.get(provider)
    return p is None or p.by_model


def self_hosted(provider: str) -> bool:
    """A server of one's own (Ollama, vLLM): no list price applies, only a price file's."""
    p = BY_NAME.get(provider)
    return p is not None and p.self_hosted


def base_url_prefixes() -> dict[str, str]:
    """Base-URL mode's ``/<prefix>/...`` routes → the upstream host."""
    return {p.base_url_prefix: p.base_url_host for p in PROVIDERS if p.base_url_prefix}
