"""The call record: one per intercepted LLM call, shaped like the ``llm_calls`` row.

Unknown values are ``None`` (NULL), never 0. Token counts follow OTel semantics:
``input_tokens`` includes cache reads and writes, ``output_tokens`` includes reasoning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

OUTCOMES = ("ok", "error", "cancelled")
ERROR_TYPES = (
    "",
    "rate_limited",
    "quota_exhausted",
    "overloaded",
    "server_error",
    "timeout",
    "bad_request",
    "context_length_exceeded",
    "content_filter",
    "auth",
    "not_found",
    "upstream_disconnected",
)
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "refusal", "error", "cancelled", "")
USAGE_SOURCES = ("provider", "estimated", "none")


@dataclass(slots=True)
class CallRecord:
    timestamp: float = 0.0  # unix seconds, request start
    trace_id: str = ""
    span_id: str = ""
    service: str = ""
    provider: str = ""
    api: str = ""
    operation: str = ""
    server_address: str = ""
    server_port: int = 443
    request_model: str = ""
    response_model: str = ""
    request_id: str = ""
    response_id: str = ""
    stream: bool = False
    status_code: int = 0
    outcome: str = "ok"
    error_type: str = ""
    error_code: str = ""
    error_message: str = ""
    mid_stream_error: bool = False
    finish_reason: str = ""
    finish_reason_raw: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    usage_source: str = "none"
    cost_usd: float | None = None
    input_cost_usd: float | None = None
    output_cost_usd: float | None = None
    ttfb_ms: float | None = None
    ttft_ms: float | None = None
    duration_ms: float = 0.0
    decode_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_max_ms: float | None = None
    output_tokens_per_s: float | None = None
    provider_processing_ms: float | None = None
    content_events: int = 0
    tool_calls: int = 0
    max_output_tokens: int | None = None
    retry_after_s: float | None = None
    ratelimit_remaining_requests: int | None = None
    ratelimit_remaining_tokens: int | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    user_id: str = ""
    session_id: str = ""
    tenant: str = ""
    feature: str = ""
    prompt_version: str = ""
    api_key_id: str = ""
    request_hash: str = ""
    # Not columns of llm_calls; carried on the span only.
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


COLUMN_NAMES: tuple[str, ...] = tuple(f.name for f in fields(CallRecord) if f.name not in ("extra",))
