"""One error taxonomy for every provider: HTTP and in-stream errors → ``error_type``.

The classification looks at the status *and* the body (code, type, message),
because providers reuse statuses: OpenAI's 429 means a rate limit or an empty
wallet, Anthropic reports credit exhaustion as a 400.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..record import ErrorType

_RETRY_RE = re.compile(
    r"(?:try again|retry)\s+(?:in|after)\s+(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|minutes?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Rule:
    error_type: ErrorType
    codes: tuple[str, ...] = ()  # matched against code and type, exact, lower case
    phrases: tuple[str, ...] = ()  # matched in the message, lower case
    statuses: tuple[int, ...] = ()


# Three passes, each in rule order: the error's code/type against every rule's codes, then
# its message against every rule's phrases, then the HTTP status. The first match wins.
RULES: tuple[Rule, ...] = (
    Rule(
        "quota_exhausted",
        codes=(
            "insufficient_quota",
            "billing_error",
            "quota_exceeded",
            "payment_required",
            "quota_per_day",
            "servicequotaexceededexception",
        ),
        phrases=(
            "exceeded your current quota",
            "credit balance is too low",
            "insufficient credits",
            "billing details",
            "out of credits",
        ),
        statuses=(402,),
    ),
    Rule(
        "context_length_exceeded",
        codes=("context_length_exceeded", "model_context_window_exceeded", "string_above_max_length"),
        phrases=(
            "prompt is too long",
            "maximum context length",
            "context window",
            "context length",
            "too many tokens",
            "input is too long",
        ),
    ),
    Rule(
        "content_filter",
        codes=("content_filter", "content_policy_violation", "responsibleaipolicyviolation", "invalid_prompt"),
        phrases=("content management policy", "content filter"),
    ),
    Rule(
        "overloaded",
        codes=(
            "overloaded_error",
            "server_is_overloaded",
            "overloaded",
            "slow_down",
            "serviceunavailableexception",
            "modelnotreadyexception",
            "unavailable",
        ),
        phrases=("overloaded",),
        statuses=(529,),
    ),
    Rule(
        "rate_limited",
        codes=(
            "rate_limit_exceeded",
            "rate_limit_error",
            "requests",
            "tokens",
            "too_many_requests",
            "quota_per_minute",
            "throttlingexception",
            "resource_exhausted",
        ),
        phrases=("rate limit",),
        statuses=(429,),
    ),
    Rule(
        "auth",
        codes=(
            "authentication_error",
            "permission_error",
            "invalid_api_key",
            "unauthorized",
            "permission_denied",
            "invalid_authentication",
            "accessdeniedexception",
            "unauthenticated",
        ),
        statuses=(401, 403),
    ),
    Rule(
        "not_found",
        codes=("not_found_error", "model_not_found", "not_found", "resourcenotfoundexception"),
        statuses=(404,),
    ),
    Rule(
        "timeout",
        codes=("timeout_error", "timeout", "request_timeout", "modeltimeoutexception", "deadline_exceeded"),
        statuses=(408, 504),
    ),
    Rule(
        "server_error",
        codes=(
            "server_error",
            "api_error",
            "internal_error",
            "internal_server_error",
            "internalserverexception",
            "modelstreamerrorexception",
            "modelerrorexception",
            "internal",
        ),
        statuses=(500, 501, 502, 503),
    ),
    Rule(
        "bad_request",
        codes=("invalid_request", "bad_request", "validation_error", "validationexception", "invalid_argument"),
        statuses=(400, 409, 413, 415, 422),
    ),
)


# The HTTP status an error type stands for, when an error in the body of a 2xx answer names its
# class but no status (Anthropic's in-stream ``event: error``, OpenAI-style error types).
IMPLIED_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
}


def classify(status: int = 0, code: str = "", type_: str = "", message: str = "", stated_status: int = 0) -> ErrorType:
    """Return the ``error_type`` for an error. ``status`` 0 or 2xx means "in the body".

    An error in the body of a 2xx answer is classified by what it says: its code and type, its
    message, then the status it states itself (``status_code: 400``, Google's numeric ``code``)
    or the one its type stands for (:data:`IMPLIED_STATUS`); only an error that says nothing of
    its class is a ``server_error``.
    """
    keys = {k.strip().lower() for k in (code, type_) if k}
    msg = (message or "").lower()
    if not 400 <= status <= 599:
        status = stated_status or next((IMPLIED_STATUS[k] for k in sorted(keys) if k in IMPLIED_STATUS), status)
    for rule in RULES:
        if keys.intersection(rule.codes):
            return rule.error_type
    for rule in RULES:
        if any(p in msg for p in rule.phrases):
            return rule.error_type
    for rule in RULES:
        if status in rule.statuses:
            return rule.error_type
    if status >= 500:
        return "server_error"
    if status >= 400:
        return "bad_request"
    return "server_error"  # an error object in a 2xx body with nothing recognisable


def transport_error_type(message: str) -> ErrorType:
    """A call that ended without its answer and without an error object: cut, or timed out."""
    low = message.lower()
    return "timeout" if "timed out" in low or "timeout" in low else "upstream_disconnected"


def retry_after_from_message(message: str) -> float | None:
    """Parse waits like "Please try again in 11.054s" / "in 174ms" / "in 35 seconds"."""
    m = _RETRY_RE.search(message or "")
    if not m:
        return None
    value, unit = float(m.group(1)), m.group(2).lower()
    if unit.startswith("ms") or unit.startswith("milli"):
        return value / 1000.0
    if unit.startswith("m") and not unit.startswith("ms"):
        return value * 60.0
    return value
