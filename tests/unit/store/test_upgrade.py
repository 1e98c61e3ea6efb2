"""A store an earlier llmtap created (schema version 1) is upgraded in place at start, from the one schema."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from llmtap.store.schema import SCHEMA_VERSION, upgrade_statements

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
