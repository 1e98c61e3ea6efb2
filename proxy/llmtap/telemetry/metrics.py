"""Prometheus metrics (the contract in DESIGN.md): one registry, no per-request labels.

Label values that come from requests are bounded (an attacker's 1,000 model names grew ``/metrics``
to ~55 MB; 200 priced calls with free-text Azure models, 23 KB to 813 KB): ``model`` is one of the
first :data:`MAX_PRICED_MODELS` request models seen for that provider among priced calls, or of the
first :data:`MAX_UNPRICED_MODELS` among the others (so junk names never crowd real ones out), within
:data:`MAX_MODELS_TOTAL` over all providers, else ``other``; ``api_key_id`` is one of the first
:data:`MAX_KEYS` fingerprints seen, else ``other``.
Every value from a record is made safe first (:func:`safe_label`): one model named ``"\ud800"`` made
every later scrape fail until a restart. The other labels are closed vocabularies.
"""

from __future__ import annotations

import re
import threading
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..record import CallRecord, is_llm_call
from ..safetext import safe_text

# OTel GenAI advice (gen_ai.client.operation.duration, time_to_first_chunk, time_per_output_chunk).
GENAI_SECONDS_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
CONTENT_TYPE = CONTENT_TYPE_LATEST
# The sidecar's own delay per call: sub-millisecond when all is well.
OVERHEAD_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


MAX_PRICED_MODELS = 50  # per provider
MAX_UNPRICED_MODELS = 50  # per provider
MAX_MODELS_TOTAL = 200  # each of the two, over all providers
MAX_KEYS = 100
MAX_LABEL_CHARS = 128
OTHER = "other"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


StatusClass = Literal["1xx", "2xx", "3xx", "4xx", "5xx", "none"]


def status_class(status_code: int) -> StatusClass:
    """``llmtap_other_requests_total``'s ``status_class``: ``2xx`` … ``5xx``, ``none`` when no response came."""
    classes: tuple[StatusClass, ...] = ("1xx", "2xx", "3xx", "4xx", "5xx")
    return classes[status_code // 100 - 1] if 100 <= status_code < 600 else "none"


def safe_label(value: str) -> str:
    """A label value every scrape can carry: cut to :data:`MAX_LABEL_CHARS`, code points UTF-8 cannot
    encode (lone surrogates) and control characters replaced by U+FFFD."""
    value = safe_text(value[:MAX_LABEL_CHARS])
    return value if value.isprintable() else _CONTROL.sub("\ufffd", value)


class _Bounded:
    """The first ``limit`` values seen per group (and ``total`` over all groups) pass; the rest become ``other``."""

    def __init__(self, limit: int, total: int = 0) -> None:
        self.limit = limit
        self.total = total or limit  # over all groups
        self.seen: dict[str, set[str]] = {}
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, group: str, value: str) -> str:
        value = safe_label(value)
        if not value:
            return value
        with self._lock:
            seen = self.seen.setdefault(group, set())
            if value in seen:
                return value
            if len(seen) < self.limit and self.count < self.total:
                seen.add(value)
                self.count += 1
                return value
        return OTHER


class Metrics:
    def __init__(self) -> None:
        self._priced = _Bounded(MAX_PRICED_MODELS, MAX_MODELS_TOTAL)
        self._unpriced = _Bounded(MAX_UNPRICED_MODELS, MAX_MODELS_TOTAL)
        self._keys = _Bounded(MAX_KEYS)
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "llmtap_requests",
            "LLM calls seen",
            ["provider", "model", "operation", "outcome", "error_type"],
            registry=r,
        )
        self.tokens = Counter(
            "llmtap_tokens",
            "Tokens (input and output are inclusive totals)",
            ["provider", "model", "type"],
            registry=r,
        )
        self.cost = Counter(
            "llmtap_cost_usd", "Cost in USD (calls with a known price)", ["provider", "model"], registry=r
        )
        self.duration = Histogram(
            "llmtap_request_duration_seconds",
            "Request start to end of response",
            ["provider", "model", "operation", "outcome"],
            buckets=GENAI_SECONDS_BUCKETS,
            registry=r,
        )
        self.ttft = Histogram(
            "llmtap_time_to_first_token_seconds",
            "Request start to first content-bearing event (streams)",
            ["provider", "model"],
            buckets=GENAI_SECONDS_BUCKETS,
            registry=r,
        )
        self.chunk_gap = Histogram(
            "llmtap_time_per_output_chunk_seconds",
            "Gap between consecutive content-bearing events",
            ["provider", "model"],
            buckets=GENAI_SECONDS_BUCKETS,
            registry=r,
        )
        self.mid_stream = Counter(
            "llmtap_mid_stream_errors",
            "Errors that arrived in the body after a 2xx",
            ["provider", "model", "error_type"],
            registry=r,
        )
        self.ratelimit = Gauge(
            "llmtap_ratelimit_remaining",
            "Remaining rate limit reported by the provider",
            ["provider", "api_key_id", "kind"],
            registry=r,
        )
        self.dropped = Counter("llmtap_records_dropped", "Records lost, by reason", ["reason"], registry=r)
        self.store_errors = Counter(
            "llmtap_store_errors",
            "Store-path faults, by reason (store_unavailable, spool_write, writer)",
            ["reason"],
            registry=r,
        )
        self.store_queue = Gauge("llmtap_store_queue_records", "Records waiting for the store", registry=r)
        self.spool_bytes = Gauge("llmtap_spool_bytes", "Bytes in the on-disk spool", registry=r)
        self.client_connections = Gauge("llmtap_client_connections", "Client connections open on the proxy", registry=r)
        self.client_dropped = Counter(
            "llmtap_client_connections_dropped",
            "Client connections closed or refused by the limits (cap, evicted_idle, header_timeout, "
            "refused_destination)",
            ["reason"],
            registry=r,
        )
        self.parse_errors = Counter(
            "llmtap_parse_errors", "Side-parser failures (traffic unaffected)", ["api"], registry=r
        )
        self.overhead = Histogram(
            "llmtap_overhead_seconds",
            "Time llmtap's own code spent on the event loop per call (hooks and the side parser on every "
            "chunk; the proxying itself not counted)",
            ["provider"],
            buckets=OVERHEAD_BUCKETS,
            registry=r,
        )
        self.price_lookups = Counter(
            "llmtap_price_lookups", "Price lookups by result (hit, model_only, miss)", ["result"], registry=r
        )
        self.cache_miss_cost = Counter(
            "llmtap_cache_miss_cost_usd",
            "What prompt-cache misses cost over a warm cache",
            ["provider", "model", "reason"],
            registry=r,
        )
        self.retry_attempts = Counter(
            "llmtap_retry_attempts",
            "Retries (attempt > 1), by the error of the attempt they repeat",
            ["provider", "model", "error_type"],
            registry=r,
        )
        self.other_requests = Counter(
            "llmtap_other_requests",
            "Requests on intercepted hosts that are not LLM calls (api = ''): agents' telemetry, token counts, uploads",
            ["provider", "status_class"],
            registry=r,
        )
        self.no_first_token = Counter(
            "llmtap_no_first_token",
            "Streams that ended without a content-bearing event",
            ["provider", "model", "reason"],
            registry=r,
        )

    def model_label(self, rec: CallRecord) -> str:
        return (self._priced if rec.cost_source else self._unpriced)(rec.provider, rec.request_model)

    def observe(self, rec: CallRecord, gaps_s: list[float] | None = None) -> None:
        p = safe_label(rec.provider)
        if not is_llm_call(rec.api):  # an other request: counted apart, in none of the call metrics
            self.other_requests.labels(p, status_class(rec.status_code)).inc()
            return
        m = self.model_label(rec)
        self.requests.labels(p, m, rec.operation, rec.outcome, rec.error_type).inc()
        for kind, n in (
            ("input", rec.input_tokens),
            ("output", rec.output_tokens),
            ("cache_read", rec.cache_read_tokens),
            ("cache_write", rec.cache_write_tokens),
            ("reasoning", rec.reasoning_tokens),
        ):
            if n:
                self.tokens.labels(p, m, kind).inc(n)
        if rec.cost_usd:
            self.cost.labels(p, m).inc(rec.cost_usd)
        if not (rec.billing == "batch" and rec.duration_ms == 0):  # a batch item's duration is unknown
            self.duration.labels(p, m, rec.operation, rec.outcome).observe(rec.duration_ms / 1000.0)
        if rec.ttft_ms is not None:
            self.ttft.labels(p, m).observe(rec.ttft_ms / 1000.0)
        if gaps_s:
            h = self.chunk_gap.labels(p, m)
            for g in gaps_s:
                h.observe(g)
        if rec.mid_stream_error:
            self.mid_stream.labels(p, m, rec.error_type).inc()
        key = self._keys("", rec.api_key_id)
        if rec.ratelimit_remaining_requests is not None:
            self.ratelimit.labels(p, key, "requests").set(rec.ratelimit_remaining_requests)
        if rec.ratelimit_remaining_tokens is not None:
            self.ratelimit.labels(p, key, "tokens").set(rec.ratelimit_remaining_tokens)
        if rec.overhead_ms is not None:
            self.overhead.labels(p).observe(rec.overhead_ms / 1000.0)
        if rec.cache_miss_cost_usd:
            self.cache_miss_cost.labels(p, m, rec.cache_miss_reason).inc(rec.cache_miss_cost_usd)
        if rec.attempt > 1:
            self.retry_attempts.labels(p, m, safe_label(rec.retried_error_type)).inc()
        if rec.stream and rec.ttft_ms is None and rec.operation != "embeddings":
            self.no_first_token.labels(p, m, no_first_token_reason(rec)).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsSink:
    """A :class:`~llmtap.pipeline.RecordSink` that counts each record into :class:`Metrics`."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def emit(self, record: CallRecord) -> None:
        self.metrics.observe(record, record.gaps_s)

    def flush(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        pass


def no_first_token_reason(rec: CallRecord) -> str:
    """Why a stream never produced content: ``timeout``, ``error``, ``cancelled`` or ``empty``."""
    if rec.error_type == "timeout":
        return "timeout"
    if rec.outcome == "error":
        return "error"
    if rec.outcome == "cancelled":
        return "cancelled"
    return "empty"
