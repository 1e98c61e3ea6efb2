"""The schema and the span contract: record → otel_traces row → llm_calls row, through the real engine."""

from __future__ import annotations

import dataclasses
import datetime
import json
import secrets
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmtap.record import COLUMN_NAMES, CallRecord
from llmtap.store import rowbinary, schema_statements
from llmtap.store.embedded import ChdbBackend
from llmtap.store.spool import Spool, frame, json_line_converter, scan
from llmtap.store.writer import StoreWriter, rejects_rows
from llmtap.telemetry.semconv import SEMCONV, as_string, es6_number, otel_traces_row, span_attributes
from llmtap.testing import synthetic


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
    w = StoreWriter(fb, Spool(tmp_path / "spool"), batch_size=10, linger=0.01, encode=lambda r: json.dumps(r).encode())
    for i in range(25):
        w.submit({"i": i})
    assert w.flush(10.0)
    w.close()
    assert [json.loads(r)["i"] for r in fb.rows] == list(range(25))
    assert not list((tmp_path / "spool").glob("*.rec"))  # everything acknowledged: nothing kept


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


def test_spool_survives_a_torn_record(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    sp.append(b"one")
    sp.append(b"two\nwith a newline and \x00 bytes")
    seg = next(tmp_path.glob("*.rec"))
    with open(seg, "ab") as f:
        f.write(frame(b"three")[:-2])  # half a record: the writer was killed mid-write
    sp2 = Spool(tmp_path)
    b = sp2.next_batch(10)
    assert b is not None and b.rows == [b"one", b"two\nwith a newline and \x00 bytes"]
    sp2.append(b"four")  # appends continue after the cut
    sp2.ack(b)
    b2 = sp2.next_batch(10)
    assert b2 is not None and b2.rows == [b"four"]


def test_spool_stops_at_a_damaged_record_and_counts_it(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    for r in (b"alpha", b"bravo", b"charlie"):
        sp.append(r)
    sp.close()
    seg = next(tmp_path.glob("*.rec"))
    data = bytearray(seg.read_bytes())
    data[len(frame(b"alpha")) + 9] ^= 0xFF  # flip a byte inside the second record's payload
    seg.write_bytes(bytes(data))
    dropped: list[tuple[str, int]] = []
    sp2 = Spool(tmp_path, on_drop=lambda r, n: dropped.append((r, n)))
    b = sp2.next_batch(10)
    assert b is not None and b.rows == [b"alpha"]
    assert dropped == [("spool_corrupt", 1)]


def test_spool_converts_an_earlier_versions_jsonl_segment(tmp_path: Path) -> None:
    rows = [{"i": i} for i in range(5)]
    (tmp_path / "000000000000001.jsonl").write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows) + b'{"i":')
    (tmp_path / "000000000000001.ack").write_bytes(b"B 0 2\nA 0 2\n")  # two rows were in the store already
    sp = Spool(tmp_path, legacy=json_line_converter(lambda r: b"row %d" % int(str(r["i"]))))
    b = sp.next_batch(10)
    assert b is not None and b.rows == [b"row 2", b"row 3", b"row 4"]
    assert not list(tmp_path.glob("*.jsonl")) and not (tmp_path / "000000000000001.ack").exists()


def test_spool_is_bounded_and_counts_what_it_drops(tmp_path: Path) -> None:
    dropped: list[tuple[str, int]] = []
    sp = Spool(tmp_path, max_bytes=4000, segment_bytes=1000, on_drop=lambda r, n: dropped.append((r, n)))
    for i in range(200):
        sp.append(b'{"i":%d,"pad":"%s"}' % (i, b"x" * 12))
    assert sp.total_bytes() <= 4000 + 1000
    assert dropped and all(r == "spool_full" for r, _ in dropped)
    assert sum(n for _, n in dropped) + sp.unsent() == 200
    first = sp.next_batch(1)
    assert first is not None and json.loads(first.rows[0])["i"] > 0  # the oldest went first


def test_store_deduplicates_a_resent_batch(backend: ChdbBackend) -> None:
    r = full_record(span_id="04" * 8)
    row = rowbinary.encode(otel_traces_row(r))
    backend.insert_rows([row], "seg:0:1-test")
    backend.insert_rows([row], "seg:0:1-test")
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


def test_writer_lingers_for_larger_inserts_and_flush_sends_at_once(tmp_path: Path) -> None:
    fb = FlakyBackend(fail=0)
    inserts: list[int] = []
    plain_insert = fb.insert_rows

    def counting(rows: list[bytes], token: str) -> None:
        inserts.append(len(rows))
        plain_insert(rows, token)

    fb.insert_rows = counting  # type: ignore[method-assign]
    w = StoreWriter(fb, Spool(tmp_path / "spool"), batch_size=5, linger=60.0, encode=lambda r: json.dumps(r).encode())
    try:
        for i in range(12):
            w.submit({"i": i})
        deadline = time.monotonic() + 10
        while len(fb.rows) < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        assert inserts == [5, 5]  # full batches go at once; the last two wait for more rows
        assert w.queued() == 2
        assert w.flush(10.0)  # ... unless someone needs them now
        assert inserts == [5, 5, 2] and [json.loads(r)["i"] for r in fb.rows] == list(range(12))
    finally:
        w.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    attrs=st.dictionaries(st.text(min_size=1, max_size=40), st.text(max_size=300), max_size=12),
    name=st.text(max_size=200),
    message=st.text(max_size=200),
    duration=st.integers(0, 2**63),
    ns=st.integers(10**18, 4 * 10**18),  # 2001 … 2096
)
def test_rowbinary_rows_read_back_as_the_json_rows_do(
    backend: ChdbBackend, attrs: dict[str, str], name: str, message: str, duration: int, ns: int
) -> None:
    """Any strings (quotes, newlines, NUL, non-ASCII, >127 bytes): RowBinary and JSONEachRow store the same row."""
    span = secrets.token_hex(8)
    row = {
        "Timestamp": f"{ns // 10**9}.{ns % 10**9:09d}",
        "TraceId": "ef" * 16,
        "SpanId": span,
        "ParentSpanId": "",
        "TraceState": "",
        "SpanName": name,
        "SpanKind": "Client",
        "ServiceName": "rowbinary-prop",
        "ResourceAttributes": {"service.name": "rowbinary-prop"},
        "ScopeName": "not-llmtap",  # stays out of llm_calls
        "ScopeVersion": "1",
        "SpanAttributes": attrs,
        "Duration": duration,
        "StatusCode": "Error",
        "StatusMessage": message,
    }
    backend.insert_rows([rowbinary.encode(row)], f"prop-rb-{span}")
    backend._session.query(
        f"INSERT INTO llmtap.otel_traces SETTINGS insert_deduplication_token = 'prop-json-{span}' FORMAT JSONEachRow\n"
        + json.dumps({**row, "ServiceName": "rowbinary-prop-json"})
    )
    got = backend.query(
        "SELECT ServiceName, Timestamp, SpanName, ResourceAttributes, SpanAttributes, Duration, StatusMessage "
        f"FROM otel_traces WHERE SpanId = '{span}' AND ServiceName LIKE 'rowbinary-prop%' ORDER BY ServiceName",
        "JSONEachRow",
    )
    a, b = (json.loads(x) for x in got.splitlines())
    assert a.pop("ServiceName") == "rowbinary-prop" and b.pop("ServiceName") == "rowbinary-prop-json"
    assert a == b
    assert a["SpanAttributes"] == attrs and a["SpanName"] == name and int(a["Duration"]) == duration


class PickyBackend(FlakyBackend):
    """Rejects any batch holding a row that does not parse, as ClickHouse does (the whole insert fails)."""

    def __init__(self, outage_after: int = -1) -> None:
        super().__init__(fail=0)
        self.attempts = 0
        self.outage_after = outage_after  # the store goes away once, after this many attempts

    def insert_rows(self, rows: list[bytes], token: str) -> None:
        self.attempts += 1
        if self.attempts == self.outage_after:
            raise ConnectionError("store away")
        if any(not r.startswith(b"{") for r in rows):
            raise RuntimeError(
                "Code: 27. DB::Exception: Cannot parse input: expected '{' (CANNOT_PARSE_INPUT_ASSERTION_FAILED)"
            )
        super().insert_rows(rows, token)


@pytest.mark.parametrize("outage_after", [-1, 3, 9, 12])
def test_writer_quarantines_rows_the_store_rejects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outage_after: int
) -> None:
    """A rejected row neither blocks the spool forever nor takes its batch down: the others are stored once
    (also when the store goes away mid-split), the rejected one is kept in quarantine and counted."""
    monkeypatch.setattr(time, "sleep", lambda s: None)
    pb = PickyBackend(outage_after)
    dropped: list[tuple[str, int]] = []
    rows = [json.dumps({"i": i}).encode() for i in range(40)]
    rows[13] = rows[31] = b"garbage"
    w = StoreWriter(
        pb,
        Spool(tmp_path / "spool"),
        batch_size=40,
        linger=0.01,
        encode=lambda r: r["raw"],
        quarantine_dir=tmp_path / "quarantine",
        on_drop=lambda reason, n: dropped.append((reason, n)),
    )
    for r in rows:
        w.submit({"raw": r})
    assert w.flush(10.0)
    w.close()
    assert sorted(json.loads(r)["i"] for r in pb.rows) == [i for i in range(40) if i not in (13, 31)]
    assert (w.written, w.quarantined) == (38, 2)
    assert dropped == [("store_rejected", 1), ("store_rejected", 1)]
    kept = sorted((tmp_path / "quarantine").glob("*.rec"))
    assert len(kept) == 2 and all(scan(p.read_bytes())[0] == [0] for p in kept)
    assert {p.read_bytes()[8:] for p in kept} == {b"garbage"}
    assert not list((tmp_path / "spool").glob("*.rec"))


def test_store_rejection_is_told_from_unavailability(inproc_store: ChdbBackend) -> None:
    """The engine's own error for a malformed RowBinary row is classed as a rejection; a dead endpoint is not."""
    good = rowbinary.encode(next(iter(synthetic.rows(1, 3))))
    with pytest.raises(Exception) as bad:
        inproc_store.insert_rows([good[: len(good) // 2]], "torn-row-test")
    assert rejects_rows(bad.value), str(bad.value)[:300]
    assert not rejects_rows(ConnectionRefusedError(111, "Connection refused"))
    assert not rejects_rows(RuntimeError("Code: 241. DB::Exception: Memory limit exceeded (MEMORY_LIMIT_EXCEEDED)"))
    # a changed table refusing the cast refuses every row: retried, not quarantined row by row
    assert not rejects_rows(
        RuntimeError("Code: 53. DB::Exception: Type mismatch in IN or VALUES section (TYPE_MISMATCH)")
    )
