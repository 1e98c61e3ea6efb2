"""Synthetic but realistic call records: for the demo's history, the dashboard tests and the benchmarks.

Traffic follows a daily cycle, spreads over providers, models, features, users and keys, and
includes cache hits, reasoning, errors of every kind (rate limits, overloads and server errors are retried:
the same request again, ``attempt`` 2, 3, …), cancellations and truncations. A cost
regression can be planted: one feature's calls cost ``factor`` times more in the last hour.
Costs come from the same pricer the sidecar uses.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import random
import secrets
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..providers import ProviderName
from ..record import Api, CacheMissReason, CallRecord, ErrorType
from ..telemetry.pricing import Pricer
from ..telemetry.semconv import otel_traces_row
from .callers import caller
from .synthetic_prices import LinearPrices

MODELS: list[tuple[ProviderName, Api, str, str, int, int, int]] = [
    # provider, api, request model, response model, weight, mean output tokens, ttft ms
    ("openai", "openai.chat_completions", "gpt-4o", "gpt-4o-2024-08-06", 30, 350, 450),
    ("openai", "openai.chat_completions", "gpt-4o-mini", "gpt-4o-mini-2024-07-18", 40, 250, 300),
    ("openai", "openai.responses", "o3-mini", "o3-mini-2025-01-31", 8, 900, 2500),
    ("anthropic", "anthropic.messages", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929", 20, 400, 700),
    ("anthropic", "anthropic.messages", "claude-haiku-4-5", "claude-haiku-4-5-20251001", 10, 200, 350),
    ("openai", "openai.embeddings", "text-embedding-3-small", "text-embedding-3-small", 15, 0, 0),
]
FEATURES = ["search", "summarize", "chat", "extract", "classify"]
SERVICES = ["checkout-api", "support-bot", "search-svc"]
RETRIED = ("rate_limited", "overloaded", "server_error")  # errors a client retries
ERRORS: list[tuple[ErrorType, int, str]] = [
    ("rate_limited", 429, "rate_limit_exceeded"),
    ("quota_exhausted", 429, "insufficient_quota"),
    ("overloaded", 529, ""),
    ("server_error", 500, ""),
    ("context_length_exceeded", 400, ""),
    ("upstream_disconnected", 200, ""),
]


SESSION_S = (
    7200  # a session: one of two runs of a user in a two-hour slot (~8 calls on the demo's history, up to a few dozen)
)


def session_of(user: int, ts: float, draw: int) -> str:
    """A user's session at ``ts``: two runs can overlap in a slot (``draw`` picks one)."""
    return f"s-{user}-{int(ts // SESSION_S)}{'ab'[draw % 2]}"


def daily_weight(ts: float) -> float:
    """Traffic at ``ts`` relative to the day's mean (the daily cycle of :func:`generate`: more in working
    hours, UTC). ``llmtap demo`` paces its live traffic with it, so live and seeded rates agree."""
    return _cycle(ts) / _CYCLE_MEAN


def _cycle(ts: float) -> float:
    hour = (ts % 86400) / 3600
    return 0.35 + 0.65 * max(0.0, math.sin((hour - 6) / 24 * 2 * math.pi))


_CYCLE_MEAN = 0.35 + 0.65 / math.pi  # the mean of _cycle over a day


@dataclass
class Regression:
    feature: str
    factor: float
    window_s: int = 3600


def generate(
    n: int,
    start: float,
    end: float,
    seed: int = 7,
    regression: Regression | None = None,
    pricer: Pricer | None = None,
    steady: bool = False,
) -> Iterator[CallRecord]:
    """``steady``: uniform times, constant token counts, no errors — for deterministic baselines."""
    rnd = random.Random(seed)
    who = random.Random(seed + 1)  # the calling tool and plan: its own draws, the rest stays as it was
    retries = random.Random(seed + 2)  # the retries' own draws too
    dims = random.Random(seed + 3)  # the cost dimensions (unpriced models, cache misses): their own too
    prices = LinearPrices(pricer or Pricer())
    weights = [m[4] for m in MODELS]
    for _ in range(n):
        # daily cycle: more traffic in working hours (UTC)
        while True:
            ts = rnd.uniform(start, end)
            if steady:
                break
            if rnd.random() < _cycle(ts):
                break
        provider, api, model, resp_model, _, mean_out, ttft_base = rnd.choices(MODELS, weights)[0]
        embeddings = api == "openai.embeddings"
        feature = rnd.choice(FEATURES)
        r = CallRecord(
            timestamp=ts,
            trace_id=secrets.token_hex(16),
            span_id=secrets.token_hex(8),
            service=rnd.choice(SERVICES),
            provider=provider,
            api=api,
            operation="embeddings" if embeddings else "chat",
            server_address="api.openai.com" if provider == "openai" else "api.anthropic.com",
            request_model=model,
            response_model=resp_model,
            request_id=f"req_{secrets.token_hex(6)}",
            response_id=f"resp_{secrets.token_hex(6)}",
            stream=not embeddings and rnd.random() < 0.8,
            status_code=200,
            user_id=f"user-{(user := rnd.randint(1, 40))}",
            session_id=session_of(user, ts, rnd.randint(1, 500)),
            tenant=rnd.choice(["acme", "globex", "initech"]),
            feature=feature,
            prompt_version=rnd.choice(["v1", "v2"]),
            api_key_id=rnd.choice(["a1b2c3d4e5f60718", "9f8e7d6c5b4a3921"]),
            request_hash=secrets.token_hex(16),
            usage_source="provider",
            max_output_tokens=1024 if not embeddings else None,
        )
        inp = 1200 if steady else int(rnd.lognormvariate(math.log(1200), 0.8))
        r.input_tokens = inp
        r.cache_read_tokens = int(inp * (0.5 if steady else rnd.choice([0, 0, 0.5, 0.8]))) if not embeddings else 0
        r.cache_write_tokens = int(inp * 0.1) if provider == "anthropic" and not steady and rnd.random() < 0.2 else 0
        out = 0 if embeddings else mean_out if steady else max(1, int(rnd.lognormvariate(math.log(mean_out), 0.5)))
        r.output_tokens = out
        r.reasoning_tokens = int(out * 0.6) if model.startswith("o3") else 0
        r.ttfb_ms = rnd.uniform(80, 250)
        evening = 17 <= (ts % 86400) / 3600 < 20
        slow = 1.8 if evening else 1.0  # "why is it slow at six in the evening?"
        if r.stream:
            r.ttft_ms = r.ttfb_ms + ttft_base * slow * rnd.lognormvariate(0, 0.3)
            itl = rnd.uniform(8, 25) * slow
            r.decode_ms = out * itl
            r.itl_p50_ms, r.itl_p95_ms, r.itl_max_ms = itl, itl * 2.2, itl * 6
            r.content_events = out
            r.output_tokens_per_s = out / (r.decode_ms / 1000) if r.decode_ms else None
            r.duration_ms = r.ttft_ms + r.decode_ms + rnd.uniform(1, 10)
        else:
            r.duration_ms = r.ttfb_ms + (ttft_base + out * 12) * slow
        r.overhead_ms = 0.08 + 0.006 * r.content_events  # llmtap's own loop time: hooks + per event (no rnd draw)
        r.finish_reason, r.finish_reason_raw = ("", "") if embeddings else ("stop", "stop")
        roll = 1.0 if steady else rnd.random()
        _unpriced(r, dims, steady)
        clean = r  # the call as it succeeds, for its retry (a copy, made before an error changes it)
        if roll < 0.06:
            clean = dataclasses.replace(r, gaps_s=[])
            etype, status, code = rnd.choice(ERRORS)
            r.outcome, r.error_type, r.error_code, r.status_code = "error", etype, code, status
            r.error_message = f"synthetic {etype}"
            r.retry_after_s = rnd.choice([None, 1.5, 20.0]) if status == 429 else None
            if status != 200:
                r.input_tokens = r.output_tokens = r.cache_read_tokens = r.reasoning_tokens = 0
                r.usage_source, r.ttft_ms, r.decode_ms, r.content_events = "none", None, None, 0
                r.itl_p50_ms = r.itl_p95_ms = r.itl_max_ms = r.output_tokens_per_s = None
                r.finish_reason = r.finish_reason_raw = ""
                r.duration_ms = (r.ttfb_ms or 0) + rnd.uniform(1, 20)  # an error status comes back at once
            else:
                r.mid_stream_error, r.finish_reason = True, "error"
        elif roll < 0.08 and r.stream:
            r.outcome, r.finish_reason, r.usage_source = "cancelled", "cancelled", "estimated"
        elif roll < 0.11 and not embeddings:
            r.finish_reason, r.finish_reason_raw = "length", "length" if provider == "openai" else "max_tokens"
        elif roll < 0.12 and not embeddings:
            r.finish_reason, r.tool_calls = "tool_calls", 1
        caller(r, who)
        _server_tools(r)
        _price(r, prices, regression, end)
        _cache_miss(r, dims, prices, steady)
        yield r
        if r.outcome == "error" and r.error_type in RETRIED:
            # a client that retries: the same request (same hash, same key) after its backoff, until it works
            t = ts + r.duration_ms / 1000
            for attempt in range(2, 2 + retries.choice([1, 1, 1, 2, 3])):
                t += r.retry_after_s or retries.uniform(0.5, 4.0)
                again = dataclasses.replace(
                    clean, timestamp=t, attempt=attempt, trace_id=secrets.token_hex(16), span_id=secrets.token_hex(8),
                    request_id=f"req_{secrets.token_hex(6)}", response_id=f"resp_{secrets.token_hex(6)}",
                )  # fmt: skip  # each attempt is its own HTTP exchange: the provider gives it its own ids
                for k in ("client_name", "client_version", "billing", "transport", "connection_id"):
                    setattr(again, k, getattr(r, k))  # the same caller sends it again
                again.ratelimit_headers = dict(r.ratelimit_headers)
                failed_again = retries.random() < 0.35
                if failed_again:
                    again.outcome, again.error_type, again.status_code = "error", r.error_type, r.status_code
                    again.error_code, again.error_message = r.error_code, r.error_message
                    again.input_tokens = again.output_tokens = again.cache_read_tokens = again.reasoning_tokens = 0
                    again.usage_source, again.ttft_ms, again.decode_ms, again.content_events = "none", None, None, 0
                    again.itl_p50_ms = again.itl_p95_ms = again.itl_max_ms = again.output_tokens_per_s = None
                    again.finish_reason = again.finish_reason_raw = ""
                    again.duration_ms = r.duration_ms
                _price(again, prices, regression, end)
                yield again
                t += again.duration_ms / 1000
                if not failed_again:
                    break


def _server_tools(r: CallRecord) -> None:
    """A quarter of the Claude answers run web searches on Anthropic's side (1–3 per call), chosen by the call's
    second: no random draw, so every other seeded value stays as it was."""
    second = int(r.timestamp)
    if r.provider == "anthropic" and second % 4 == 0 and r.outcome == "ok" and r.usage_source == "provider":
        r.server_tool_calls = {"web_search": 1 + second // 4 % 3}


def _price(r: CallRecord, prices: LinearPrices, regression: Regression | None, end: float) -> None:
    prices.apply(r)
    if regression and r.feature == regression.feature and r.timestamp > end - regression.window_s and r.cost_usd:
        r.input_tokens = int(r.input_tokens * regression.factor)
        r.output_tokens = int(r.output_tokens * regression.factor)
        r.cost_usd *= regression.factor
        r.input_cost_usd = (r.input_cost_usd or 0) * regression.factor
        r.output_cost_usd = (r.output_cost_usd or 0) * regression.factor
        if r.uncached_input_cost_usd is not None:
            r.uncached_input_cost_usd *= regression.factor


def _unpriced(r: CallRecord, rnd: random.Random, steady: bool) -> None:
    """A model no price source knows (0.5% of chat calls): the cost page lists it with its call count."""
    if not steady and r.operation == "chat" and rnd.random() < 0.005:
        r.request_model = r.response_model = "ft:internal-preview-" + ("a" if r.provider == "openai" else "b")


_MISSES: tuple[CacheMissReason, ...] = (
    "tools_changed",
    "system_changed",
    "history_changed",
    "ttl_expired",
    "model_changed",
    "unknown",
)


def _cache_miss(r: CallRecord, rnd: random.Random, prices: LinearPrices, steady: bool) -> None:
    """Anthropic calls that write the cache: a first call or a miss (a reason, priced as the
    forensics price it); the others of a caching session: hits."""
    if steady or r.provider != "anthropic" or r.outcome != "ok":
        return
    if r.cache_write_tokens:
        r.cache_miss_reason = "first_call" if rnd.random() < 0.3 else rnd.choice(_MISSES)
        # a first call is a cold start, not a miss: it costs nothing over a warm cache (DESIGN.md, third round)
        r.cache_miss_cost_usd = (
            0.0 if r.cache_miss_reason == "first_call" else prices.cache_read_saving(r, r.cache_write_tokens)
        )
    elif r.cache_read_tokens:
        r.cache_miss_cost_usd = 0.0


def rows(
    n: int, days: float, end: float | None = None, avoid_windows: bool = False, **kw: object
) -> Iterator[dict[str, object]]:
    """``avoid_windows``: stay out of the hour before ``end`` on each day (see :func:`window_rows`)."""
    end = end or time.time()
    for r in generate(n, end - days * 86400, end, **kw):  # type: ignore[arg-type]
        # 15 minutes of margin either side, so a query run a little later sees the same windows
        if avoid_windows and not 4500 <= (end - r.timestamp) % 86400 <= 86400 - 900:
            continue
        yield otel_traces_row(r)


def window_rows(
    calls: int, days: int, regression: Regression | None = None, end: float | None = None
) -> Iterator[dict[str, object]]:
    """Steady traffic in the last hour and the same hour of each previous day (a clean baseline)."""
    end = end or time.time()
    for d in range(days + 1 if calls else 0):
        w_end = end - d * 86400
        # the same seed every day: the same mix of models and features in every window
        reg = regression if d == 0 else None
        for r in generate(calls, w_end - 3600, w_end - 1, seed=100, steady=True, regression=reg):
            yield otel_traces_row(r)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data-dir", default="./llmtap-data")
    ap.add_argument("--store", default="")
    ap.add_argument("--calls", type=int, default=20000, help="background calls (default 20000)")
    ap.add_argument("--days", type=float, default=8, help="spread over this many days back from now")
    ap.add_argument("--regression", default="", help="FEATURE:FACTOR, e.g. summarize:1.6 (in the last hour)")
    ap.add_argument(
        "--windows",
        type=int,
        default=0,
        help="also CALLS steady calls in the last hour and the same hour on each of the previous days",
    )
    ap.add_argument(
        "--scenario",
        choices=("", "explain", "errors"),
        default="",
        help="explain: eight days with known cost drivers and a TTFB regression; errors: an error burst in the "
        "last 14 minutes (see llmtap.testing.scenarios)",
    )


def main(argv: list[str] | None = None) -> int:
    """``llmtap seed``: fill a store with synthetic history (stop the sidecar first for chdb://)."""
    ap = argparse.ArgumentParser(prog="llmtap seed")
    add_arguments(ap)
    return run(ap.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..startup import read_lock
    from ..store import default_store_url, open_backend, rowbinary
    from .scenarios import other_rows

    holder = None if args.store else read_lock(Path(args.data_dir))
    if holder is not None:  # chDB: one process per store
        print(
            f"llmtap seed: --data-dir {args.data_dir} is in use by a running sidecar (pid {holder.pid}): stop it first",
            file=sys.stderr,
        )
        return 2
    backend = open_backend(args.store or default_store_url(Path(args.data_dir)))
    if backend is None:
        raise SystemExit("llmtap seed: --store none has no store")
    reg = None
    if args.regression:
        feat, _, factor = args.regression.partition(":")
        reg = Regression(feat, float(factor or 1.5))
    batch: list[bytes] = []
    total = 0
    end = time.time()
    background = rows(args.calls, args.days, end=end, regression=reg, avoid_windows=args.windows > 0)
    planted: Iterator[dict[str, object]] = iter(())
    if getattr(args, "scenario", "") == "explain":
        from .scenarios import explain_records

        planted = (otel_traces_row(r) for r in explain_records(end))
    elif getattr(args, "scenario", "") == "errors":
        from .scenarios import error_burst_records

        planted = (otel_traces_row(r) for r in error_burst_records(end))
    windows = window_rows(args.windows, int(args.days), regression=reg, end=end)
    for row in itertools.chain(background, windows, planted, other_rows(args.calls // 50, args.days, end=end)):
        batch.append(rowbinary.encode(row))
        if len(batch) >= 10000:
            backend.insert_rows(batch, f"seed:{secrets.token_hex(8)}")
            total += len(batch)
            batch = []
    if batch:
        backend.insert_rows(batch, f"seed:{secrets.token_hex(8)}")
        total += len(batch)
    backend.close()
    print(f"llmtap seed: {total} synthetic calls over {args.days} days")
    return 0
