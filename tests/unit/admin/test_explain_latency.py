"""explain-latency's SQL on the real engine: a TTFB-only regression in one hour is named TTFB, at that hour,
on that server, with decode unchanged; retries and rate-limit waits are their own components."""

from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from llmtap.admin.explain import Periods
from llmtap.admin.explain_latency import explain_latency, latency_text
from llmtap.record import CallRecord
from llmtap.store.embedded import ChdbBackend
from llmtap.telemetry.semconv import otel_traces_row
from llmtap.testing import scenarios

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop

_n = itertools.count()


def load(store: ChdbBackend, records: list[CallRecord]) -> str:
    service = f"latency-{next(_n)}-{time.monotonic_ns()}"
    rows = []
    for r in records:
        r.service = service
        rows.append(otel_traces_row(r))
    for i in range(0, len(rows), 10000):
        store.insert_spans(rows[i : i + 10000], f"{service}-{i}")
    return service


def rows_fn(store: ChdbBackend) -> Any:
    return lambda sql: [json.loads(x) for x in store.query(sql, "JSONEachRow").splitlines()]


@pytest.fixture(scope="module")
def scenario(inproc_store: ChdbBackend) -> tuple[float, str]:
    end = float(int(time.time()))
    return end, load(inproc_store, list(scenarios.explain_records(end)))


@pytest.mark.parametrize("metric", ["duration", "ttft"])
def test_a_ttfb_only_regression_in_one_hour_is_named_ttfb(
    inproc_store: ChdbBackend, scenario: tuple[float, str], metric: str
) -> None:
    end, svc = scenario
    res = explain_latency(
        rows_fn(inproc_store), Periods.parse("24h", "7d", end + 60), metric, 0.95, f"service = '{svc}'"
    )
    openai = [f for f in res["findings"] if f["server_address"] == "api.openai.com"]
    assert len(openai) == 1, openai
    f = openai[0]
    hour = scenarios.regression_hour(end)
    assert f["component"] == "ttfb"
    assert (f["from"], f["to"]) == (_iso(hour), _iso(hour + 3600))
    assert 2.0 < f["ratio"] < 4.5  # planted ×3 (p95 of a small sample)
    assert "gpt-4o" in f["models"]
    if metric == "duration":
        assert "decode" in f["unchanged"]
    text = latency_text(res)
    hhmm = datetime.fromtimestamp(hour, UTC).strftime("%H:%M")
    assert "TTFB p95 ×" in text and f"at {hhmm}–" in text and "api.openai.com" in text
    sentence = next(line for line in text.splitlines() if "api.openai.com" in line)
    assert "decode length" not in sentence and "time per token" not in sentence
    if metric == "duration":
        assert sentence.endswith("unchanged") and "decode" in sentence
        # the planted output ×2.5 of summarize is decode length on the other server, over the whole window
        anth = [f for f in res["findings"] if f["server_address"] == "api.anthropic.com"]
        assert [f["component"] for f in anth] == ["decode_length"] and anth[0]["whole_window"]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def _call(ts: float, **kw: Any) -> CallRecord:
    r = CallRecord(
        api="openai.chat_completions",  # an LLM call: analyses read no other request
        timestamp=ts,
        trace_id=f"{next(_n):032x}",
        span_id=f"{next(_n):016x}",
        provider="openai",
        server_address="api.openai.com",
        request_model="gpt-4o",
        operation="chat",
        stream=True,
        status_code=200,
        api_key_id="k1",
        request_hash=f"h{next(_n)}",
        ttfb_ms=100.0,
        ttft_ms=300.0,
        decode_ms=1000.0,
        output_tokens=100,
        duration_ms=1310.0,
    )
    for k, v in kw.items():
        setattr(r, k, v)
    return r


@pytest.mark.parametrize(
    ("error_type", "status", "component"), [("rate_limited", 429, "rate_limit_wait"), ("server_error", 500, "retries")]
)
def test_retries_and_rate_limit_waits_are_components(
    inproc_store: ChdbBackend, error_type: str, status: int, component: str
) -> None:
    end = 1_750_000_000.0
    recs: list[CallRecord] = []
    for day in range(2):
        for i in range(100):
            ts = end - day * 86400 - 80000 + i * 700
            if day == 0 and i % 4 == 0:  # a quarter of the requests fail once, wait 2 s, and succeed
                h = f"retry-{next(_n)}"
                recs.append(
                    _call(
                        ts,
                        request_hash=h,
                        outcome="error",
                        error_type=error_type,
                        status_code=status,
                        ttfb_ms=50.0,
                        ttft_ms=None,
                        decode_ms=None,
                        output_tokens=0,
                        duration_ms=50.0,
                    )
                )
                recs.append(_call(ts + 2.05, request_hash=h, attempt=2))
            else:
                recs.append(_call(ts))
    svc = load(inproc_store, recs)
    res = explain_latency(
        rows_fn(inproc_store), Periods.parse("24h", "previous", end), "duration", 0.95, f"service = '{svc}'"
    )
    comps = {c["component"]: c["delta_ms"] for c in res["components"]}
    assert res["baseline_ms"] == pytest.approx(1310.0)
    assert res["value_ms"] == pytest.approx(1310.0 + 2050.0)  # first attempt start → end of the retry
    assert comps[component] == pytest.approx(2000.0 if component == "rate_limit_wait" else 2050.0)
    other = "retries" if component == "rate_limit_wait" else "rate_limit_wait"
    assert comps[other] == pytest.approx(50.0 if other == "retries" else 0.0)
    assert all(abs(v) < 1e-6 for k, v in comps.items() if k not in ("retries", "rate_limit_wait"))
