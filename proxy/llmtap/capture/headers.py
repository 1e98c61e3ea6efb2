"""What a provider's response headers say: request id, provider time, rate limits, retry-after.

Fail-open for every value: a header the provider (or anything on the way) got wrong leaves that field
unknown and the record whole. Numbers must be finite and fit their column (``1e309``, ``NaN``, 5,000
digits, ``²``: unknown, not an exception that lost the call); text is made valid UTF-8 (bytes that were
not UTF-8 reach llmtap as surrogate escapes, which the OTLP exporter cannot encode) by
:func:`~llmtap.safetext.safe_text`.
"""

from __future__ import annotations

import email.utils
import math
import re
import time

from ..record import CallRecord
from ..safetext import safe_text

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
INT64 = (-(2**63), 2**63 - 1)  # the range of the Int64 columns (and of OTLP's int attributes)
_INTEGER = re.compile(r"[+-]?[0-9]{1,19}")
MAX_NUMBER_CHARS = 64


def ratelimit_headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    """Every rate-limit/quota header of a response (names lower-cased), values verbatim (capped)."""
    out: dict[str, str] = {}
    for name, value in headers:
        k = name.lower()
        kept = k in RATELIMIT_NAMES or k.startswith(RATELIMIT_PREFIXES) or bool(_CODEX_LIMITS.match(k))
        if kept and len(out) < MAX_RATELIMIT_HEADERS:
            out[safe_text(k)] = safe_text(value[:MAX_RATELIMIT_VALUE])
    return out


def apply_response_headers(r: CallRecord, headers: list[tuple[str, str]], body_processing_ms: object = None) -> None:
    h = dict(headers)
    r.ratelimit_headers = ratelimit_headers(headers)
    for name in REQUEST_ID_HEADERS:
        if h.get(name):
            r.request_id = safe_text(h[name][:200])
            break
    for name in PROCESSING_HEADERS:
        v = to_float(h.get(name))
        if v is not None:
            r.provider_processing_ms = v
            break
    # Groq, Ollama and Bedrock report it in the body instead.
    if (
        r.provider_processing_ms is None
        and isinstance(body_processing_ms, (int, float))
        and math.isfinite(body_processing_ms)
    ):
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
    """A finite number, else ``None`` (``inf``, ``NaN``, ``1e309``, not a number)."""
    if not v or len(v) > MAX_NUMBER_CHARS or not v.isascii():  # HTTP numbers are ASCII (float() takes "١٢٣")
        return None
    try:
        f = float(v.strip())
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def to_int(v: str | None) -> int | None:
    """A whole number within Int64 (a decimal is cut toward zero), else ``None``."""
    if not v:
        return None
    text = v.strip()
    if _INTEGER.fullmatch(text):
        n = int(text)
    else:
        f = to_float(text)
        if f is None:
            return None
        n = int(f)
    return n if INT64[0] <= n <= INT64[1] else None


def retry_after(v: str) -> float | None:
    """``Retry-After``: seconds, or an HTTP date."""
    f = to_float(v)
    if f is not None:
        return f
    if len(v) > MAX_NUMBER_CHARS:
        return None
    try:
        dt = email.utils.parsedate_to_datetime(v)
        return max(dt.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError, OverflowError, OSError, IndexError):
        return None
