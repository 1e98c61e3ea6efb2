"""What a provider's response headers say: request id, provider time, rate limits, retry-after."""

from __future__ import annotations

import email.utils
import re
import time

from ..record import CallRecord

REQUEST_ID_HEADERS = (
    "x-request-id",
    "request-id",
    "apim-request-id",
    "x-amzn-requestid",
    "x-amz-request-id",
    "x-groq-id",
    "x-ds-trace-id",
    "x-generation-id",
    "cf-ray",
)
PROCESSING_HEADERS = ("openai-processing-ms", "x-envoy-upstream-service-time")  # milliseconds
# Rate-limit and quota headers, kept verbatim in ratelimit_headers: OpenAI/Groq/OpenRouter
# x-ratelimit-* (incl. *-tokens-usage-based), Anthropic anthropic-ratelimit-* (incl. the plan
# windows anthropic-ratelimit-unified-*), Azure x-ms-ratelimit-*, the IETF RateLimit fields,
# and ChatGPT-plan Codex's plan windows (x-codex-primary-*, x-codex-secondary-*, credits).
RATELIMIT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "x-ms-ratelimit-", "ratelimit-")
RATELIMIT_NAMES = frozenset({"retry-after", "retry-after-ms", "ratelimit", "ratelimit-policy"})
_CODEX_LIMITS = re.compile(r"^x-codex-(?:[a-z0-9_]+-)?(?:primary|secondary|credits|active-limit|rate-limit)")
MAX_RATELIMIT_HEADERS = 64
MAX_RATELIMIT_VALUE = 256


def ratelimit_headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    """Every rate-limit/quota header of a response (names lower-cased), values verbatim (capped)."""
    out: dict[str, str] = {}
    for name, value in headers:
        k = name.lower()
        kept = k in RATELIMIT_NAMES or k.startswith(RATELIMIT_PREFIXES) or bool(_CODEX_LIMITS.match(k))
        if kept and len(out) < MAX_RATELIMIT_HEADERS:
            out[k] = value[:MAX_RATELIMIT_VALUE]
    return out


def apply_response_headers(r: CallRecord, headers: list[tuple[str, str]], body_processing_ms: object = None) -> None:
    h = dict(headers)
    r.ratelimit_headers = ratelimit_headers(headers)
    for name in REQUEST_ID_HEADERS:
        if h.get(name):
            r.request_id = h[name][:200]
            break
    for name in PROCESSING_HEADERS:
        v = to_float(h.get(name))
        if v is not None:
            r.provider_processing_ms = v
            break
    # Groq, Ollama and Bedrock report it in the body instead.
    if r.provider_processing_ms is None and isinstance(body_processing_ms, (int, float)):
        r.provider_processing_ms = float(body_processing_ms)
    r.ratelimit_remaining_requests = to_int(
        h.get("x-ratelimit-remaining-requests") or h.get("anthropic-ratelimit-requests-remaining")
    )
    r.ratelimit_remaining_tokens = to_int(
        h.get("x-ratelimit-remaining-tokens") or h.get("anthropic-ratelimit-tokens-remaining")
    )
    ms = to_float(h.get("retry-after-ms"))
    if ms is not None:
        r.retry_after_s = ms / 1000.0
    elif h.get("retry-after"):
        r.retry_after_s = retry_after(h["retry-after"])


def to_float(v: str | None) -> float | None:
    if not v:
        return None
    try:
        return float(v.strip())
    except ValueError:
        return None


def to_int(v: str | None) -> int | None:
    f = to_float(v)
    return int(f) if f is not None else None


def retry_after(v: str) -> float | None:
    """``Retry-After``: seconds, or an HTTP date."""
    f = to_float(v)
    if f is not None:
        return f
    try:
        dt = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    return max(dt.timestamp() - time.time(), 0.0)
