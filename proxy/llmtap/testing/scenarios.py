"""Seeded histories with known answers, for ``explain-cost``, ``explain-latency``, the alerts and the viewer.

``explain``: eight identical days of steady traffic (the same calls at the same times of day), then a
last day (the 24 hours before ``end``) with six planted cost drivers and one latency regression:

- ``summarize`` (claude-sonnet-4-5): output tokens per call ×2.5 (400 → 1000) since prompt_version v7;
- ``chat`` (gpt-4o): +30% calls;
- ``search`` (claude-sonnet-4-5): cache hit ratio collapses (80% of the input read from cache → 5%);
- ``agent`` (claude-haiku-4-5): a new feature;
- ``voice`` (gpt-realtime): the audio share of its tokens rises (20% → 75%), audio priced at its own rate;
- ``research`` (claude-sonnet-4-5): web searches per call ×3 (1 → 3), each a billed server tool use;
- ``classify`` (gpt-4o-mini): unchanged;
- in one clock hour of the last day (the one starting 6 to 7 hours before ``end``), TTFB ×3 on
  api.openai.com, everything else unchanged.

Calls keep 15 minutes away from the day boundaries, so a command run up to 15 minutes after the seed sees
the same windows. Costs come from the sidecar's own pricer.
"""

from __future__ import annotations

import dataclasses
import math
import random
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..providers import ProviderName
from ..record import CallRecord
from ..telemetry.pricing import Pricer
from ..telemetry.semconv import otel_traces_row
from . import synthetic
from .synthetic_prices import DailyPrices

DAY = 86400
MARGIN = 900


@dataclass(frozen=True)
class Spec:
    feature: str
    provider: ProviderName
    model: str
    calls: int  # per baseline day
    input_tokens: int
    output_tokens: int
    cache_read_share: float = 0.0
    audio_share: float = 0.0  # of the input and of the output tokens
    web_searches: int = 0  # per call (server_tool_calls)


SPECS = (
    Spec("summarize", "anthropic", "claude-sonnet-4-5", 500, 2000, 400),
    Spec("chat", "openai", "gpt-4o", 1000, 1000, 300),
    Spec("search", "anthropic", "claude-sonnet-4-5", 100, 4000, 200, cache_read_share=0.8),
    Spec("classify", "openai", "gpt-4o-mini", 600, 800, 50),
    Spec("voice", "openai", "gpt-realtime", 80, 2000, 400, audio_share=0.2),
    Spec("research", "anthropic", "claude-sonnet-4-5", 60, 3000, 300, web_searches=1),
)
NEW = Spec("agent", "anthropic", "claude-haiku-4-5", 100, 3000, 500)
EXPECTED_ORDER = [
    ("output_tokens_per_call", "summarize"),
    ("modality_mix", "voice"),
    ("volume", "chat"),
    ("tool_calls", "research"),
    ("cache_hit_ratio", "search"),
    ("new", "agent"),
]
REGRESSION_HOUR_AGO = 6  # the TTFB regression: the clock hour starting 6-7 hours before the end
TTFB_FACTOR = 3.0


def regression_hour(end: float) -> float:
    """Start (unix seconds) of the clock hour with the TTFB regression."""
    return math.floor((end - REGRESSION_HOUR_AGO * 3600) / 3600) * 3600


def _window_spec(s: Spec) -> tuple[Spec, str]:
    """The spec as it runs in the last day, and its prompt version there."""
    if s.feature == "summarize":
        return Spec(s.feature, s.provider, s.model, s.calls, s.input_tokens, 1000), "v7"
    if s.feature == "chat":
        return Spec(s.feature, s.provider, s.model, round(s.calls * 1.3), s.input_tokens, s.output_tokens), "v1"
    if s.feature == "search":
        return Spec(s.feature, s.provider, s.model, s.calls, s.input_tokens, s.output_tokens, 0.05), "v1"
    if s.feature == "voice":
        return dataclasses.replace(s, audio_share=0.75), "v1"
    if s.feature == "research":
        return dataclasses.replace(s, web_searches=3), "v1"
    return s, "v1"


def explain_records(end: float, days: int = 7, pricer: Pricer | None = None) -> Iterator[CallRecord]:
    pricer = pricer or Pricer()
    prices = DailyPrices(pricer)  # a few usages, thousands of times each
    slow_from = regression_hour(end)
    for d in range(days + 1):
        day_end = end - d * DAY
        specs = (
            [(s, "v6" if s.feature == "summarize" else "v1") for s in SPECS]
            if d
            else [_window_spec(s) for s in SPECS] + [(NEW, "v1")]
        )
        for spec, version in specs:
            rnd = random.Random(f"{spec.feature}")  # the same calls, at the same times, every day
            span = DAY - 2 * MARGIN
            for i in range(spec.calls):
                ts = day_end - DAY + MARGIN + span * (i + 0.5) / spec.calls
                jitter = (rnd.lognormvariate(0, 0.25), rnd.lognormvariate(0, 0.3), rnd.uniform(10, 14))
                slow = d == 0 and spec.provider == "openai" and slow_from <= ts < slow_from + 3600
                yield _record(spec, version, ts, jitter, TTFB_FACTOR if slow else 1.0, prices)
    yield from agent_run(end - 2 * 3600, pricer)


AGENT_SESSION = "run-7f3a9c"


def agent_run(start: float, pricer: Pricer, calls: int = 12) -> Iterator[CallRecord]:
    """One agent run (session ``run-7f3a9c``, feature ``agent``): the context grows call by call and its prefix
    is read from cache, except the first call (written) and one after a pause (the cache expired); the fourth
    call is overloaded once and retried."""
    t, prefix = start, 0
    for i in range(calls):
        tokens = 3000 + 1500 * i
        expired = i == 7
        fails = i == 3
        for attempt in (1, 2) if fails else (1,):
            failed = fails and attempt == 1
            r = _record(NEW, "v1", t, (1.0, 1.0, 11.0), 1.0, pricer, priced=False)
            r.session_id, r.request_hash, r.attempt = AGENT_SESSION, f"agent-step-{i}", attempt
            r.client_name, r.client_version = "claude-code", "2.0.14"
            r.input_tokens, r.output_tokens = tokens, 180 + 40 * (i % 3)
            r.content_events = r.output_tokens
            r.cache_read_tokens = 0 if i == 0 or expired else prefix
            r.cache_write_tokens = tokens - r.cache_read_tokens
            if i == 0 or expired:
                r.cache_miss_reason = "first_call" if i == 0 else "ttl_expired"
                r.cache_miss_cost_usd = prefix * (1.0 - 0.1) / 1e6 if expired else 0.0
            r.finish_reason, r.finish_reason_raw = (
                ("stop", "end_turn") if i == calls - 1 else ("tool_calls", "tool_use")
            )
            r.tool_calls = 0 if i == calls - 1 else 1
            r.decode_ms = r.output_tokens * 11.0
            r.duration_ms = (r.ttft_ms or 0) + r.decode_ms + 5.0
            if failed:
                r.outcome, r.error_type, r.status_code, r.error_code = "error", "overloaded", 529, "overloaded_error"
                r.error_message, r.finish_reason, r.finish_reason_raw, r.tool_calls = "Overloaded", "", "", 0
                r.input_tokens = r.output_tokens = r.cache_read_tokens = r.cache_write_tokens = r.content_events = 0
                r.usage_source, r.ttft_ms, r.decode_ms, r.duration_ms = "none", None, None, 240.0
                r.itl_p50_ms = r.itl_p95_ms = r.itl_max_ms = r.output_tokens_per_s = None
                r.cache_miss_reason, r.cache_miss_cost_usd = "", None
                r.retry_after_s = 2.0
            pricer.apply(r)
            yield r
            t += r.duration_ms / 1000 + (2.0 if failed else 6.0 + (240.0 if i == 6 else 0.0))
        prefix = tokens


def _record(
    s: Spec,
    version: str,
    ts: float,
    jitter: tuple[float, float, float],
    ttfb_factor: float,
    pricer: Pricer | DailyPrices,
    priced: bool = True,
) -> CallRecord:
    openai = s.provider == "openai"
    r = CallRecord(
        timestamp=ts,
        trace_id=secrets.token_hex(16),
        span_id=secrets.token_hex(8),
        service="assistant-api",
        provider=s.provider,
        api="openai.chat_completions" if openai else "anthropic.messages",
        operation="chat",
        server_address="api.openai.com" if openai else "api.anthropic.com",
        request_model=s.model,
        response_model=s.model,
        request_id=f"req_{secrets.token_hex(6)}",
        response_id=f"resp_{secrets.token_hex(6)}",
        stream=True,
        status_code=200,
        feature=s.feature,
        prompt_version=version,
        user_id=f"user-{int(ts) % 23}",
        tenant=("acme", "globex", "initech")[int(ts) % 3],
        session_id=f"s-{s.feature}-{int(ts) // 3600}",
        api_key_id="a1b2c3d4e5f60718",
        request_hash=secrets.token_hex(16),
        usage_source="provider",
        finish_reason="stop",
        finish_reason_raw="stop" if openai else "end_turn",
        input_tokens=s.input_tokens,
        output_tokens=s.output_tokens,
        cache_read_tokens=round(s.input_tokens * s.cache_read_share),
        content_events=s.output_tokens,
        input_audio_tokens=round(s.input_tokens * s.audio_share),
        output_audio_tokens=round(s.output_tokens * s.audio_share),
        server_tool_calls={"web_search": s.web_searches} if s.web_searches else {},
    )
    r.ttfb_ms = 150.0 * jitter[0] * ttfb_factor
    r.ttft_ms = r.ttfb_ms + 300.0 * jitter[1]
    itl = jitter[2]
    r.decode_ms = s.output_tokens * itl
    r.itl_p50_ms, r.itl_p95_ms, r.itl_max_ms = itl, itl * 2, itl * 5
    r.output_tokens_per_s = s.output_tokens / (r.decode_ms / 1000)
    r.duration_ms = r.ttft_ms + r.decode_ms + 5.0
    if priced:
        pricer.apply(r)
    return r


def error_burst_records(
    end: float,
    provider: ProviderName = "openai",
    model: str = "gpt-4o-mini",
    calls: int = 40,
    errors: int = 6,
    minutes: int = 14,
) -> Iterator[CallRecord]:
    """``errors``: ``calls`` calls over the last ``minutes``, ``errors`` of them failing (429 / 500): the error-rate
    alert's condition has held for its pending period when the sidecar starts."""
    for i in range(calls):
        ts = end - minutes * 60 + (i + 0.5) * minutes * 60 / calls
        failed = i * errors // calls != (i + 1) * errors // calls  # ``errors`` failures, evenly spread
        r = CallRecord(
            timestamp=ts,
            trace_id=secrets.token_hex(16),
            span_id=secrets.token_hex(8),
            service="checkout-api",
            provider=provider,
            api="openai.chat_completions",
            operation="chat",
            server_address="api.openai.com",
            request_model=model,
            response_model=model,
            request_hash=secrets.token_hex(16),
            status_code=500 if failed else 200,
            outcome="error" if failed else "ok",
            error_type="server_error" if failed else "",
            error_message="synthetic server error" if failed else "",
            usage_source="none" if failed else "provider",
            input_tokens=0 if failed else 50,
            output_tokens=0 if failed else 10,
            duration_ms=120.0,
            ttfb_ms=100.0,
            finish_reason="" if failed else "stop",
        )
        yield r


# Claude Code's requests that are not model calls (issue #31): event logging and feature flags on its API host.
OTHER_PATHS = ("/api/event_logging/v2/batch", "/api/eval/sdk-abc123")


def other_requests(n: int, start: float, end: float, seed: int = 11) -> Iterator[CallRecord]:
    """Requests on intercepted hosts that are not LLM calls (``api = ''``, ``operation = 'other'``, no usage):
    a coding agent's telemetry, a quarter of it answered 404 (a mock, an endpoint that moved). Never in an LLM
    total, an error rate or a cost: the other-requests panel shows them."""
    rnd = random.Random(seed)
    for _ in range(n):
        status = 404 if rnd.random() < 0.25 else 200
        r = CallRecord(
            timestamp=rnd.uniform(start, end),
            trace_id=secrets.token_hex(16),
            span_id=secrets.token_hex(8),
            service=rnd.choice(synthetic.SERVICES),
            provider="anthropic",
            api="",
            operation="other",
            server_address="api.anthropic.com",
            status_code=status,
            outcome="ok" if status == 200 else "error",
            error_type="" if status == 200 else "not_found",
            feature=rnd.choice(synthetic.FEATURES),
            client_name="claude-code",
            client_version="2.1.126",
            usage_source="none",
            request_bytes=rnd.randint(800, 9000),
            response_bytes=rnd.randint(2, 200),
        )
        r.ttfb_ms = r.duration_ms = rnd.uniform(40, 200)
        yield r


def other_rows(n: int, days: float, end: float | None = None) -> Iterator[dict[str, object]]:
    """:func:`other_requests` as ``otel_traces`` rows, over ``days`` back from ``end``."""
    end = end or time.time()
    for r in other_requests(n, end - days * 86400, end):
        yield otel_traces_row(r)
