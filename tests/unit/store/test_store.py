"""The embedded store: the schema, the view chain, deduplication, RowBinary."""

from __future__ import annotations

import datetime
import json
import secrets

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmtap.record import COLUMN_NAMES
from llmtap.store import rowbinary, schema_statements
from llmtap.store.embedded import ChdbBackend
from llmtap.store.writer import rejects_rows
from llmtap.telemetry.semconv import otel_traces_row
from llmtap.testing import builders, synthetic

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop


@pytest.fixture
def backend(inproc_store: ChdbBackend) -> ChdbBackend:
    return inproc_store


def read_row(backend: ChdbBackend, span_id: str) -> dict[str, object]:
    out = backend.query(f"SELECT * FROM llm_calls WHERE span_id = '{span_id}'", "JSONEachRow")
    rows = [json.loads(x) for x in out.splitlines()]
    assert len(rows) == 1
    return rows[0]


def test_every_column_round_trips_through_the_span(backend: ChdbBackend) -> None:
    r = builders.sample_record(span_id="01" * 8)
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
    r = builders.sample_record(
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
    row = otel_traces_row(builders.sample_record(span_id="03" * 8))
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


def test_store_deduplicates_a_resent_batch(backend: ChdbBackend) -> None:
    r = builders.sample_record(span_id="04" * 8)
    row = rowbinary.encode(otel_traces_row(r))
    backend.insert_rows([row], "seg:0:1-test")
    backend.insert_rows([row], "seg:0:1-test")
    out = backend.query("SELECT count() FROM llm_calls WHERE span_id = '" + "04" * 8 + "'", "CSV")
    assert out.strip() == b"1"


def test_hourly_rollup_is_fed_by_the_view_chain(backend: ChdbBackend) -> None:
    r = builders.sample_record(span_id="05" * 8, feature="rollup-test", cost_usd=0.5, ttft_ms=100.0, duration_ms=200.0)
    backend.insert_spans([otel_traces_row(r)])
    out = backend.query(
        "SELECT sum(calls) AS calls, sum(errors) AS errors, sum(cost_usd_sum) AS cost, "
        "quantilesTDigestMerge(0.5, 0.95)(ttft_ms_q) AS ttft FROM llm_calls_hourly WHERE feature = 'rollup-test'",
        "JSONEachRow",
    )
    row = json.loads(out)
    assert (row["calls"], row["errors"], row["cost"], row["ttft"]) == (1, 1, 0.5, [100, 100])


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


def test_inserts_leave_skip_indexes_to_the_merges(tmp_path_factory: pytest.TempPathFactory) -> None:
    """otel_traces' skip indexes are not built by each insert (rowbinary.INSERT_SETTINGS) but by the merge that
    writes the part again; a trace-id lookup finds the span before the merge and after it."""
    import subprocess
    import sys
    import textwrap

    store = tmp_path_factory.mktemp("skipidx") / "store"
    code = f"""
        import json
        from pathlib import Path
        from llmtap.store.embedded import ChdbBackend
        from llmtap.testing import synthetic
        b = ChdbBackend(Path({str(store)!r}))
        rows = list(synthetic.rows(2000, 1))
        b.insert_spans(rows[:1000], "a")
        b.insert_spans(rows[1000:], "b")
        parts = "SELECT count(), sum(secondary_indices_compressed_bytes) > 0 FROM system.parts " \\
            "WHERE database = 'llmtap' AND table = 'otel_traces' AND active"
        tid = rows[1500]["TraceId"]
        find = f"SELECT count() FROM otel_traces WHERE TraceId = '{{tid}}'"
        before = [b.query(parts, "JSONCompactEachRow").decode(), b.query(find, "CSV").decode()]
        b.query("OPTIMIZE TABLE otel_traces FINAL", "CSV")
        after = [b.query(parts, "JSONCompactEachRow").decode(), b.query(find, "CSV").decode()]
        print(json.dumps([before, after]))
        b.close()
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after = json.loads(out.stdout.strip().splitlines()[-1])
    assert json.loads(before[0])[1] == 0 and json.loads(after[0])[1] == 1  # no index bytes until the merge
    assert before[1].strip() == after[1].strip() != "0"


def test_a_server_without_the_insert_settings_gets_inserts_without_them() -> None:
    """A ClickHouse server older than a setting of rowbinary.INSERT_SETTINGS would refuse every insert: the
    server store sends only the settings its server lists."""
    from llmtap.store.clickhouse import ClickHouseBackend

    class Client:
        database: str | None = None

        def __init__(self, known: set[str]) -> None:
            self.server_settings = dict.fromkeys(known, object())
            self.sent: list[bytes] = []

        def raw_insert(self, insert_block: bytes) -> None:
            self.sent.append(insert_block)

    for known, expected in ((set(rowbinary.INSERT_SETTINGS), True), (set(), False)):
        b = ClickHouseBackend("clickhouse://default:@127.0.0.1:1/llmtap", writer=False)
        b._client, b._schema_ready = Client(known), True
        b.insert_rows([rowbinary.encode(next(iter(synthetic.rows(1, 3))))], "tok")
        head = b._client.sent[0].split(b"\n", 1)[0].decode()
        assert head.startswith("INSERT INTO llmtap.otel_traces") and "insert_deduplication_token = 'tok'" in head
        assert all((f"{k} = " in head) == expected for k in rowbinary.INSERT_SETTINGS), head
