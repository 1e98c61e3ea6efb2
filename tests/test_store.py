"""The schema and the span contract: record → otel_traces row → llm_calls row, through the real engine."""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from pathlib import Path

import pytest

from llmtap.otel import SEMCONV, as_string, es6_number, otel_traces_row, span_attributes
from llmtap.record import COLUMN_NAMES, CallRecord
from llmtap.store import schema_statements
from llmtap.store.embedded import ChdbBackend
from llmtap.store.spool import Spool
from llmtap.store.writer import StoreWriter


@pytest.fixture
def backend(inproc_store: ChdbBackend) -> ChdbBackend:
    return inproc_store


def full_record(**kw: object) -> CallRecord:
    r = CallRecord(
        timestamp=1795950880.123456,
        trace_id="ab" * 16,
        span_id="cd" * 8,
        service="checkout",
        provider="openai",
        api="openai.chat_completions",
        operation="chat",
        server_address="api.openai.com",
        request_model="gpt-4o",
        response_model="gpt-4o-2024-08-06",
        request_id="req_1",
        response_id="chatcmpl-1",
        stream=True,
        status_code=200,
        outcome="error",
        error_type="rate_limited",
        error_code="rate_limit_exceeded",
        error_message="slow down ☃",
        mid_stream_error=True,
        finish_reason="error",
        finish_reason_raw="",
        input_tokens=2048,
        output_tokens=96,
        cache_read_tokens=1024,
        cache_write_tokens=12,
        reasoning_tokens=64,
        usage_source="provider",
        cost_usd=0.0123,
        input_cost_usd=0.01,
        output_cost_usd=0.0023,
        ttfb_ms=101.5,
        ttft_ms=250.25,
        duration_ms=1234.5,
        decode_ms=900.125,
        itl_p50_ms=10.5,
        itl_p95_ms=30.75,
        itl_max_ms=120.0,
        output_tokens_per_s=106.6,
        provider_processing_ms=42.0,
        content_events=80,
        tool_calls=2,
        max_output_tokens=4096,
        retry_after_s=11.054,
        ratelimit_remaining_requests=4999,
        ratelimit_remaining_tokens=-1,
        request_bytes=1000,
        response_bytes=20000,
        user_id="u",
        session_id="s",
        tenant="t",
        feature="f",
        prompt_version="v2",
        api_key_id="0123abcd",
        request_hash="ff" * 16,
    )
    return dataclasses.replace(r, **kw)  # type: ignore[arg-type]


def read_row(backend: ChdbBackend, span_id: str) -> dict[str, object]:
    out = backend.query(f"SELECT * FROM llm_calls WHERE span_id = '{span_id}'", "JSONEachRow")
    rows = [json.loads(x) for x in out.splitlines()]
    assert len(rows) == 1
    return rows[0]


def test_every_column_round_trips_through_the_span(backend: ChdbBackend) -> None:
    r = full_record(span_id="01" * 8)
    backend.insert_spans([otel_traces_row(r)])
    row = read_row(backend, r.span_id)
    assert set(row) == set(COLUMN_NAMES) - {"server_port"}
    for col in COLUMN_NAMES:
        if col in ("timestamp", "server_port"):
            continue
        want = getattr(r, col)
        assert row[col] == (pytest.approx(want) if isinstance(want, float) else want), col
    want_ts = datetime.datetime.fromtimestamp(r.timestamp, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    assert row["timestamp"] == want_ts  # UTC, microseconds


def test_unknown_values_are_null_not_zero(backend: ChdbBackend) -> None:
    r = full_record(
        span_id="02" * 8,
        cost_usd=None,
        input_cost_usd=None,
        output_cost_usd=None,
        ttft_ms=None,
        ttfb_ms=None,
        decode_ms=None,
        itl_p50_ms=None,
        itl_p95_ms=None,
        itl_max_ms=None,
        output_tokens_per_s=None,
        provider_processing_ms=None,
        max_output_tokens=None,
        retry_after_s=None,
        ratelimit_remaining_requests=None,
        ratelimit_remaining_tokens=None,
        error_type="",
        response_model="",
    )
    backend.insert_spans([otel_traces_row(r)])
    row = read_row(backend, r.span_id)
    for col in (
        "cost_usd",
        "ttft_ms",
        "ttfb_ms",
        "decode_ms",
        "itl_p50_ms",
        "max_output_tokens",
        "retry_after_s",
        "ratelimit_remaining_requests",
        "provider_processing_ms",
        "output_tokens_per_s",
    ):
        assert row[col] is None, col
    assert row["error_type"] == "" and row["response_model"] == ""


def test_view_ignores_other_instrumentation_scopes(backend: ChdbBackend) -> None:
    row = otel_traces_row(full_record(span_id="03" * 8))
    row["ScopeName"] = "opentelemetry.instrumentation.httpx"
    backend.insert_spans([row])
    out = backend.query("SELECT count() FROM llm_calls WHERE span_id = '" + "03" * 8 + "'", "CSV")
    assert out.strip() == b"0"


def test_schema_is_idempotent(backend: ChdbBackend) -> None:
    before = backend.query("SELECT count() FROM llm_calls", "CSV")
    backend.apply_schema()
    backend.apply_schema()
    assert backend.query("SELECT count() FROM llm_calls", "CSV") == before
    stmts = schema_statements("llmtap")
    assert any("CREATE MATERIALIZED VIEW" in s for s in stmts)
    assert all("{db}" not in s for s in stmts)
    with pytest.raises(ValueError):
        schema_statements("x; DROP")


def test_span_attributes_use_genai_names() -> None:
    attrs = span_attributes(full_record())
    for name in (
        "gen_ai.provider.name",
        "gen_ai.operation.name",
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.request.stream",
        "gen_ai.request.max_tokens",
        "gen_ai.response.time_to_first_chunk",
        "server.address",
        "error.type",
        "http.response.status_code",
    ):
        assert name in attrs, name
    assert attrs["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.25025)
    assert set(SEMCONV) <= set(COLUMN_NAMES)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (3, "3"),
        (1.0, "1"),
        (0.5, "0.5"),
        (1e-7, "1e-7"),
        (5e-5, "0.00005"),
        (1e21, "1e+21"),
        (123456789012.5, "123456789012.5"),
        (["stop"], '["stop"]'),
        ("x", "x"),
        (-2.25, "-2.25"),
    ],
)
def test_attribute_stringification_matches_the_collector(value: object, text: str) -> None:
    assert as_string(value) == text


def test_es6_numbers_round_trip() -> None:
    for f in (0.1 + 0.2, 1 / 3, 12345.678, 9.999e-7, 2.5e22):
        assert float(es6_number(f)) == f


class FlakyBackend:
    def __init__(self, fail: int = 2) -> None:
        self.rows: list[bytes] = []
        self.tokens: list[str] = []
        self.fail = fail

    def insert_rows(self, rows: list[bytes], token: str) -> None:
        if self.fail:
            self.fail -= 1
            raise ConnectionError("store away")
        if token not in self.tokens:  # what the store's deduplication does
            self.rows += rows
            self.tokens.append(token)

    def query(self, sql: str, fmt: str = "JSONEachRow") -> bytes:
        return b""

    def close(self) -> None:
        pass


def test_writer_batches_and_retries_without_losing_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda s: None)
    fb = FlakyBackend()
    w = StoreWriter(fb, Spool(tmp_path / "spool"), batch_size=10, flush_interval=0.01)
    for i in range(25):
        w.submit({"i": i})
    assert w.flush(10.0)
    w.close()
    assert [json.loads(r)["i"] for r in fb.rows] == list(range(25))
    assert not list((tmp_path / "spool").glob("*.jsonl"))  # everything acknowledged: nothing kept


def test_spool_replays_a_begun_batch_with_the_same_token(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    for i in range(5):
        sp.append(b'{"i":%d}' % i)
    b1 = sp.next_batch(3)
    assert b1 is not None and len(b1.rows) == 3
    sp.ack(b1)
    b2 = sp.next_batch(3)  # begun, then the process dies before the ack
    assert b2 is not None and b2.rows == [b'{"i":3}', b'{"i":4}']
    del sp  # no close(): a crash
    sp2 = Spool(tmp_path)
    again = sp2.next_batch(100)
    assert again is not None and (again.rows, again.token) == (b2.rows, b2.token)
    sp2.ack(again)
    assert sp2.next_batch(100) is None and sp2.unsent() == 0


def test_spool_survives_a_torn_line(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    sp.append(b'{"i":1}')
    seg = next(tmp_path.glob("*.jsonl"))
    with open(seg, "ab") as f:
        f.write(b'{"i":2')  # half a record: the writer was killed mid-write
    sp2 = Spool(tmp_path)
    b = sp2.next_batch(10)
    assert b is not None and b.rows == [b'{"i":1}']


def test_spool_is_bounded_and_counts_what_it_drops(tmp_path: Path) -> None:
    dropped: list[tuple[str, int]] = []
    sp = Spool(tmp_path, max_bytes=4000, segment_bytes=1000, on_drop=lambda r, n: dropped.append((r, n)))
    for i in range(200):
        sp.append(b'{"i":%d,"pad":"%s"}' % (i, b"x" * 20))
    assert sp.total_bytes() <= 4000 + 1000
    assert dropped and all(r == "spool_full" for r, _ in dropped)
    assert sum(n for _, n in dropped) + sp.unsent() == 200
    first = sp.next_batch(1)
    assert first is not None and json.loads(first.rows[0])["i"] > 0  # the oldest went first


def test_store_deduplicates_a_resent_batch(backend: ChdbBackend) -> None:
    r = full_record(span_id="04" * 8)
    line = json.dumps(otel_traces_row(r)).encode()
    backend.insert_rows([line], "seg:0:1-test")
    backend.insert_rows([line], "seg:0:1-test")
    out = backend.query("SELECT count() FROM llm_calls WHERE span_id = '" + "04" * 8 + "'", "CSV")
    assert out.strip() == b"1"


def test_hourly_rollup_is_fed_by_the_view_chain(backend: ChdbBackend) -> None:
    r = full_record(span_id="05" * 8, feature="rollup-test", cost_usd=0.5, ttft_ms=100.0, duration_ms=200.0)
    backend.insert_spans([otel_traces_row(r)])
    out = backend.query(
        "SELECT sum(calls) AS calls, sum(errors) AS errors, sum(cost_usd_sum) AS cost, "
        "quantilesTDigestMerge(0.5, 0.95)(ttft_ms_q) AS ttft FROM llm_calls_hourly WHERE feature = 'rollup-test'",
        "JSONEachRow",
    )
    row = json.loads(out)
    assert (row["calls"], row["errors"], row["cost"], row["ttft"]) == (1, 1, 0.5, [100, 100])
