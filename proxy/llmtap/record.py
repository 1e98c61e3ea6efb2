"""The call record: one per intercepted LLM call, shaped like the ``llm_calls`` row.

Unknown values are ``None`` (NULL), never 0. Token counts follow OTel semantics:
``input_tokens`` includes cache reads and writes, ``output_tokens`` includes reasoning.

The closed vocabularies of the contract (``../shared/DESIGN.md``) are ``Literal`` types
here, once, so that mypy catches a typo anywhere a value is written; the tuples beside
them are the same sets at run time. The ``provider`` vocabulary is the provider table's
(:data:`llmtap.providers.ProviderName`: a row per name).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from .providers import PROVIDER_NAMES, ProviderName

Api = Literal[
    "openai.chat_completions",
    "openai.responses",
    "openai.completions",
    "openai.embeddings",
    "openai.realtime",
    "openai.batches",
    "openai.files",
    "anthropic.messages",
    "anthropic.message_batches",
    "gemini.generate_content",
    "bedrock.converse",
    "bedrock.invoke",
    "ollama.chat",
    "ollama.generate",
    "",
]
"""The wire API (one per adapter, :mod:`llmtap.adapters`); ``''``: a request on an intercepted host that no
adapter speaks for (not an LLM call)."""
Operation = Literal["chat", "text_completion", "embeddings", "generate_content", "batch", "other"]
"""The GenAI operation (``gen_ai.operation.name``): what the API does; ``batch`` for the batch APIs' own calls
(create, poll, results download), ``other`` for a request that is not an LLM call (``api = ''``)."""

LLM_CALL_SQL = "api != ''"
"""The one predicate that says an ``llm_calls`` row is an LLM call (the contract's third round): a request on an
intercepted host that is not a model call (an agent's telemetry, a token count, a file upload, an API no adapter
speaks) has ``api = ''`` and ``operation = 'other'``. Every board, alert rule, ``report``, ``check-cost``, explain
analysis, the hourly rollup and the Prometheus call metrics derive from it (:func:`is_llm_call`)."""


def is_llm_call(api: str) -> bool:
    """The same test on a record as :data:`LLM_CALL_SQL` on a row."""
    return api != ""


Outcome = Literal["ok", "error", "cancelled"]
ErrorType = Literal[
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
]
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "refusal", "error", "cancelled", ""]
UsageSource = Literal["provider", "partial", "estimated", "none"]
Transport = Literal["http", "websocket"]
# How the sidecar received the client's connection (``llmtap run --mode``): HTTPS_PROXY/CONNECT or base-URL
# requests (``regular``), redirected by netfilter rules (``transparent``), or the eBPF redirector (``local``).
CaptureMode = Literal["regular", "transparent", "local"]
Billing = Literal["api", "subscription", "batch", ""]
CostSource = Literal["genai-prices", "genai-prices:model", "price_file", "provider", ""]
ServerTool = Literal["web_search", "web_fetch", "file_search", "code_execution", "image_generation", "mcp", "grounding"]
"""``server_tool_calls`` kinds: server-side tool uses a provider bills (or may bill) per use."""
CacheMissReason = Literal[
    "", "first_call", "ttl_expired", "tools_changed", "system_changed", "history_changed", "model_changed", "unknown"
]
EndKind = Literal["complete", "client_disconnected", "upstream_error", "sidecar_shutdown"]
"""How a call's transport ended: the response completed, the client went away, the upstream
failed (reset, timeout, protocol error), or the sidecar cut it at the end of its drain."""

APIS: tuple[Api, ...] = get_args(Api)
OPERATIONS: tuple[Operation, ...] = get_args(Operation)
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
ERROR_TYPES: tuple[ErrorType, ...] = get_args(ErrorType)
FINISH_REASONS: tuple[FinishReason, ...] = get_args(FinishReason)
USAGE_SOURCES: tuple[UsageSource, ...] = get_args(UsageSource)
TRANSPORTS: tuple[Transport, ...] = get_args(Transport)
BILLINGS: tuple[Billing, ...] = get_args(Billing)
PROVIDERS: tuple[ProviderName, ...] = PROVIDER_NAMES
SERVER_TOOLS: tuple[ServerTool, ...] = get_args(ServerTool)
CACHE_MISS_REASONS: tuple[CacheMissReason, ...] = get_args(CacheMissReason)

ERROR_MESSAGE_CAP = 1000
"""``error_message`` is cut to this many characters (the contract)."""


def cap_message(text: str) -> str:
    return text[:ERROR_MESSAGE_CAP]


@dataclass(slots=True)
class CallRecord:
    timestamp: float = 0.0  # unix seconds, request start
    trace_id: str = ""
    span_id: str = ""
    service: str = ""
    provider: ProviderName | Literal[""] = ""  # '' only before a call is routed
    api: Api = ""
    operation: Operation = "other"
    server_address: str = ""
    server_port: int = 443
    request_model: str = ""
    response_model: str = ""
    request_id: str = ""
    response_id: str = ""
    stream: bool = False
    status_code: int = 0
    outcome: Outcome = "ok"
    error_type: ErrorType = ""
    error_code: str = ""
    error_message: str = ""
    mid_stream_error: bool = False
    finish_reason: FinishReason = ""
    finish_reason_raw: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    usage_source: UsageSource = "none"
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
    # -- second round (DESIGN.md, "Contract additions") --
    transport: Transport = "http"
    connection_id: str = ""
    service_tier: str = ""
    request_service_tier: str = ""
    cache_write_1h_tokens: int = 0
    cost_source: CostSource = ""
    price_version: str = ""
    billing: Billing = ""
    client_name: str = ""
    client_version: str = ""
    ratelimit_headers: dict[str, str] = field(default_factory=dict)
    attempt: int = 1
    cache_miss_reason: CacheMissReason = ""
    cache_miss_cost_usd: float | None = None
    overhead_ms: float | None = None  # llmtap's own time on the event loop for the call (hooks + tee)
    batch_id: str = ""  # the provider's batch id, for rows built from batch results
    uncached_input_cost_usd: float | None = None  # the input priced with no cache in use (cache savings, explain-cost)
    # -- third round (DESIGN.md, "Modalities and server-side tools") --
    input_audio_tokens: int = 0  # subsets of input_tokens by modality
    input_image_tokens: int = 0
    output_audio_tokens: int = 0  # subsets of output_tokens by modality
    output_image_tokens: int = 0
    cache_read_audio_tokens: int = 0  # subset of cache_read_tokens that was audio
    server_tool_calls: dict[str, int] = field(default_factory=dict)  # billed server-side tool uses by kind
    tool_cost_usd: float | None = None  # what those uses cost; part of cost_usd
    text_rate_input_cost_usd: float | None = None  # the input with no cache, every token at the text rate (explain)
    text_rate_output_cost_usd: float | None = None  # the output, every token at the text rate (explain-cost)
    # -- not columns of llm_calls: the span's parent (its ParentSpanId), then what the span alone carries --
    parent_span_id: str = ""  # an app's traceparent span, or the batch download that carried an item
    parse_error: str = ""  # why the side parser stopped (the bytes still passed)
    usage_estimator: str = ""  # what counted estimated tokens (tiktoken's encoding, or the heuristic)
    capture_mode: CaptureMode | Literal[""] = ""  # how the sidecar received the call (``llmtap.capture_mode``)
    batch_items_dropped: int | None = None  # a batch results download: items past the record bound
    batch_items: int | None = None  # ... and the items it carried
    batch_custom_id: str = ""  # a batch item's own id
    retried_error_type: str = ""  # a retry: the error of the attempt it repeats
    unpriced_tools: str = ""  # server tool kinds used that no price covers (comma-separated): cost_usd lacks them
    input_messages: str = ""  # --capture-content: the prompt (redacted, capped)
    output_messages: str = ""  # ... and the answer
    # Not carried anywhere: the gaps between content events (seconds), for the metrics sink.
    gaps_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The record's ``llm_calls`` columns by name, shallow."""
        out = {name: getattr(self, name) for name in COLUMN_NAMES}
        out["ratelimit_headers"] = dict(self.ratelimit_headers)
        out["server_tool_calls"] = dict(self.server_tool_calls)
        return out


SPAN_ONLY: tuple[str, ...] = (
    "parse_error",
    "usage_estimator",
    "capture_mode",
    "batch_items_dropped",
    "batch_items",
    "batch_custom_id",
    "retried_error_type",
    "unpriced_tools",
    "input_messages",
    "output_messages",
)
"""Fields the span carries that are not ``llm_calls`` columns, in the order its attributes list them."""
NOT_COLUMNS = frozenset({"parent_span_id", *SPAN_ONLY, "gaps_s"})
COLUMN_NAMES: tuple[str, ...] = tuple(f.name for f in fields(CallRecord) if f.name not in NOT_COLUMNS)
