"""The call and session pages' data on the real engine: a failed call and its retries found as one request's
attempts, the session in order with running totals, ids bound (never SQL)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from llmtap.admin.pages import PageError, call_page, session_page
from llmtap.record import CallRecord
from llmtap.store.embedded import ChdbBackend
from llmtap.telemetry.semconv import otel_traces_row

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop

T = 1_700_000_000.0
_n = itertools.count()


def query(store: ChdbBackend) -> Any:
    def q(sql: str, fmt: str, params: dict[str, str]) -> bytes:
        with store._lock:  # the read path with bound parameters, as the admin server runs it
            res = store._session.query(sql, fmt, params=params)
        return bytes(res.bytes()) if res is not None else b""

    return q


def call(ts: float, **kw: Any) -> CallRecord:
    r = CallRecord(
        timestamp=ts,
        trace_id=f"{next(_n) + 10**6:032x}",
        span_id=f"{next(_n):016x}",
        service="agent",
        provider="anthropic",
        request_model="claude-sonnet-4-5",
        operation="chat",
        status_code=200,
        api_key_id="key1",
        request_hash=f"h{next(_n)}",
        input_tokens=1000,
        output_tokens=100,
        duration_ms=1000.0,
        cost_usd=0.01,
        usage_source="provider",
    )
    for k, v in kw.items():
        setattr(r, k, v)
    return r


@pytest.fixture(scope="module")
def session(inproc_store: ChdbBackend) -> dict[str, Any]:
    sid = f"sess-{T}"
    failed = call(
        T + 10,
        session_id=sid,
        request_hash="same",
        outcome="error",
        error_type="overloaded",
        status_code=529,
        cost_usd=None,
        input_tokens=0,
        output_tokens=0,
        duration_ms=200.0,
    )
    recs = [
        call(T, session_id=sid, cache_miss_reason="first_call", cache_write_tokens=900),
        failed,
        call(
            T + 12,
            session_id=sid,
            request_hash="same",
            attempt=2,
            outcome="error",
            error_type="overloaded",
            status_code=529,
            cost_usd=None,
            duration_ms=150.0,
        ),
        call(T + 15, session_id=sid, request_hash="same", attempt=3, cache_read_tokens=900),
        call(T + 40, session_id=sid, request_hash="same"),  # the same request later: a new request, not a retry
        call(T + 60, session_id=sid, cache_read_tokens=900, cost_usd=0.002),
        call(T + 70, session_id="other"),
    ]
    inproc_store.insert_spans([otel_traces_row(r) for r in recs], f"pages-{T}")
    return {"sid": sid, "recs": recs, "failed": failed}


def test_call_page_finds_the_attempts_of_its_request(inproc_store: ChdbBackend, session: dict[str, Any]) -> None:
    recs = session["recs"]
    page = call_page(query(inproc_store), {"trace_id": recs[2].trace_id}, grafana_url="https://grafana.example/")
    assert page["call"]["trace_id"] == recs[2].trace_id and page["call"]["attempt"] == 2
    assert [a["trace_id"] for a in page["attempts"]] == [r.trace_id for r in recs[1:4]]
    assert [a["outcome"] for a in page["attempts"]] == ["error", "error", "ok"]
    assert (
        page["links"]["grafana"] == f"https://grafana.example/d/llmtap-trace/llm-trace?var-trace_id={recs[2].trace_id}"
    )
    assert [c["trace_id"] for c in page["session"]] == [r.trace_id for r in recs[:6]]
    assert page["content"] is None
    alone = call_page(query(inproc_store), {"trace_id": recs[4].trace_id})
    assert alone["attempts"] == [] and "grafana" not in alone["links"]


def test_session_page_running_totals(inproc_store: ChdbBackend, session: dict[str, Any]) -> None:
    page = session_page(query(inproc_store), {"session_id": session["sid"]})
    rows = page["calls"]
    assert len(rows) == 6 and [r["trace_id"] for r in rows] == [r.trace_id for r in session["recs"][:6]]
    assert [round(r["cost_total_usd"], 6) for r in rows] == [0.01, 0.01, 0.01, 0.02, 0.03, 0.032]
    assert rows[-1]["elapsed_ms"] == pytest.approx(60_000 + 1000)
    assert rows[-1]["llm_time_total_ms"] == pytest.approx(1000 + 200 + 150 + 1000 + 1000 + 1000)
    assert [r["cache"] for r in rows] == ["miss: first_call", "", "", "hit", "", "hit"]
    s = page["summary"]
    assert (s["calls"], s["retries"], s["errors"], s["cache_hits"], s["cache_misses"]) == (6, 2, 2, 2, 1)
    assert s["cost_usd"] == pytest.approx(0.032)


@pytest.mark.parametrize("bad", ["", "x' OR 1=1 --", "a" * 300, None, 5])
def test_ids_are_checked_and_bound(inproc_store: ChdbBackend, bad: Any) -> None:
    with pytest.raises(PageError):
        call_page(query(inproc_store), {"trace_id": bad})
    with pytest.raises(PageError):
        session_page(query(inproc_store), {"session_id": bad})


def test_a_session_id_is_any_text_an_app_sent_and_bound(inproc_store: ChdbBackend) -> None:
    """Session ids come from headers (up to 256 characters of anything): quotes, spaces and markup select
    exactly that session, because the id is a bound parameter, not SQL."""
    odd = [f"team/run 1 '{T}'", f"x' OR 1=1 -- {T}", f"<img src=x onerror=alert(1)> {T}"]
    recs = [call(T + i, session_id=sid) for i, sid in enumerate(odd)]
    inproc_store.insert_spans([otel_traces_row(r) for r in recs], f"odd-sessions-{T}")
    for sid, rec in zip(odd, recs, strict=True):
        page = session_page(query(inproc_store), {"session_id": sid})
        assert [c["trace_id"] for c in page["calls"]] == [rec.trace_id]
    with pytest.raises(PageError, match="no calls in session"):
        session_page(query(inproc_store), {"session_id": "' OR 1=1 --"})
    with pytest.raises(PageError):
        session_page(query(inproc_store), {"session_id": "a\nb"})


def test_unknown_ids(inproc_store: ChdbBackend) -> None:
    with pytest.raises(PageError, match="no call"):
        call_page(query(inproc_store), {"trace_id": "f" * 32})
    with pytest.raises(PageError, match="no calls in session"):
        session_page(query(inproc_store), {"session_id": "nobody"})
