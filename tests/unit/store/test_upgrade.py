"""A store an earlier llmtap created (schema version 1) is upgraded in place at start, from the one schema."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from llmtap.store.schema import SCHEMA_VERSION, upgrade_statements

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop

V1 = Path(__file__).with_name("fixtures") / "schema_v1.sql"


def run(code: str) -> str:
    """chDB allows one store path per process: each step in its own interpreter."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_version_1_store_gains_the_new_columns_and_views(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run(f"""
        from chdb import session
        s = session.Session({str(store)!r})
        text = open({str(V1)!r}).read()
        text = "\\n".join(l for l in text.splitlines() if not l.lstrip().startswith("--"))
        for stmt in [x.strip().replace("{{db}}", "llmtap") for x in text.split(";") if x.strip()]:
            s.query(stmt)
        s.query(\"\"\"INSERT INTO llmtap.otel_traces (Timestamp, TraceId, SpanId, SpanName, SpanKind, ServiceName,
            ScopeName, SpanAttributes, Duration) VALUES (now64(9), 'old', 'old', 'chat m', 'Client', 'svc', 'llmtap',
            map('gen_ai.request.model', 'gpt-4o', 'llmtap.outcome', 'ok'), 1000000)\"\"\")
        s.close()
    """)
    out = run(f"""
        import json
        from llmtap.record import CallRecord
        from llmtap.store.embedded import ChdbBackend
        from llmtap.telemetry.semconv import otel_traces_row
        b = ChdbBackend(__import__("pathlib").Path({str(store)!r}))
        r = CallRecord(timestamp=1.7e9, trace_id="ab" * 16, span_id="new", request_model="gpt-4o", attempt=2,
                       ratelimit_headers={{"retry-after": "3"}}, billing="subscription", transport="websocket")
        b.insert_spans([otel_traces_row(r)])
        rows = b.query("SELECT span_id, attempt, billing, transport, ratelimit_headers FROM llm_calls ORDER BY span_id")
        version = b.query("SELECT max(version) AS v FROM llmtap_schema")
        print(json.dumps([rows.decode(), version.decode()]))
        b.close()
    """)
    rows_text, version_text = json.loads(out.strip().splitlines()[-1])
    rows = [json.loads(x) for x in rows_text.splitlines()]
    assert rows == [
        {
            "span_id": "new",
            "attempt": 2,
            "billing": "subscription",
            "transport": "websocket",
            "ratelimit_headers": {"retry-after": "3"},
        },
        {"span_id": "old", "attempt": 1, "billing": "", "transport": "http", "ratelimit_headers": {}},
    ]
    assert json.loads(version_text)["v"] == SCHEMA_VERSION


def test_upgrade_statements_never_touch_the_collectors_table() -> None:
    stmts = upgrade_statements("llmtap")
    assert stmts and not [s for s in stmts if "otel_traces " in s.split(" MODIFY QUERY ")[0]]
    assert any(s.startswith("ALTER TABLE llmtap.llm_calls_mv MODIFY QUERY SELECT") for s in stmts)
    assert "ALTER TABLE llmtap.llm_calls ADD COLUMN IF NOT EXISTS attempt UInt16 DEFAULT 1" in stmts


def test_rollup_rows_of_an_earlier_version_are_not_explain_ready(tmp_path: Path) -> None:
    """The hourly rollup gains explain-cost's sums; the rows an earlier version rolled up lack them, so they say
    so (explain_ready 0) and explain-cost reads their hours from llm_calls: the same rows as over the calls."""
    store = tmp_path / "store"
    run(f"""
        from chdb import session
        s = session.Session({str(store)!r})
        text = open({str(V1)!r}).read()
        text = "\\n".join(l for l in text.splitlines() if not l.lstrip().startswith("--"))
        for stmt in [x.strip().replace("{{db}}", "llmtap") for x in text.split(";") if x.strip()]:
            s.query(stmt)
        s.query(\"\"\"INSERT INTO llmtap.otel_traces (Timestamp, TraceId, SpanId, SpanName, SpanKind, ServiceName,
            ScopeName, SpanAttributes, Duration) VALUES (now64(9) - INTERVAL 2 HOUR, 'old', 'old', 'chat m', 'Client',
            'svc', 'llmtap', map('llmtap.api', 'openai.chat_completions', 'gen_ai.request.model', 'm',
            'llmtap.outcome', 'ok', 'llmtap.cost_usd', '0.5',
            'llmtap.input_cost_usd', '0.5', 'gen_ai.usage.input_tokens', '100'), 1000000)\"\"\")
        s.close()
    """)
    out = run(f"""
        import json, time
        from llmtap.admin import explain_sql
        from llmtap.record import CallRecord
        from llmtap.store.embedded import ChdbBackend
        from llmtap.telemetry.semconv import otel_traces_row
        b = ChdbBackend(__import__("pathlib").Path({str(store)!r}))
        r = CallRecord(api="openai.chat_completions", timestamp=time.time() - 7200, trace_id="ab" * 16, span_id="new",
                       service="svc", request_model="m", cost_usd=0.25, input_cost_usd=0.25, input_tokens=50)
        b.insert_spans([otel_traces_row(r)])
        ready = b.query("SELECT explain_ready, first_priced_calls FROM llm_calls_hourly ORDER BY explain_ready",
                        "JSONCompactEachRow")
        sql = explain_sql.explain_cost_sql(("model",), w="86400", n="1", step="86400")
        rolled = b.query(sql, "JSONEachRow")
        explain_sql.ROLLUP_DIMENSIONS = ()
        print(json.dumps([ready.decode(), rolled.decode(), b.query(explain_sql.explain_cost_sql(("model",), w="86400",
              n="1", step="86400"), "JSONEachRow").decode()]))
        b.close()
    """)
    ready, rolled, raw = json.loads(out.strip().splitlines()[-1])
    assert [json.loads(x) for x in ready.splitlines()] == [[0, 0], [1, 1]]
    total = next(json.loads(x) for x in rolled.splitlines() if json.loads(x)["driver"] == "total")
    assert total["after"] == 0.75  # the old call (0.5) and the new one (0.25), both in the window
    assert rolled == raw
