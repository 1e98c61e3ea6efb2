"""The benchmark's store side: ingest rates, bytes per call on disk, and dashboard panel timings on 10M rows."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from llmtap.testing import synthetic
from llmtap.testing.harness import start_chhttp

ROOT = Path(__file__).resolve().parents[1]


def ingest(tmp: Path, rows: int) -> tuple[dict[str, float], Any]:
    from llmtap.store import rowbinary
    from llmtap.store.clickhouse import ClickHouseBackend
    from llmtap.store.embedded import ChdbBackend
    from llmtap.store.writer import StoreWriter

    # Rows as the spool holds them: in the order calls finished, each encoded once at submit; sent in
    # blocks of the writer's batch size, as while it catches up after an outage.
    spool_order = sorted(synthetic.rows(rows, 7), key=lambda r: float(str(r["Timestamp"])))
    lines = [rowbinary.encode(r) for r in spool_order]
    block = StoreWriter.__init__.__kwdefaults__["batch_size"]
    out = {}
    chdb_backend = ChdbBackend(tmp / "ingest-chdb")
    t0 = time.perf_counter()
    for i in range(0, len(lines), block):
        chdb_backend.insert_rows(lines[i : i + block], f"bench-{i}")
    out["chDB (embedded)"] = len(lines) / (time.perf_counter() - t0)
    ch = start_chhttp(tmp / "ingest-ch")
    try:
        b = ClickHouseBackend(f"clickhouse://default:@127.0.0.1:{ch.port}/llmtap")
        t0 = time.perf_counter()
        for i in range(0, len(lines), block):
            b.insert_rows(lines[i : i + block], f"bench-{i}")
        out["ClickHouse HTTP (over chDB)"] = len(lines) / (time.perf_counter() - t0)
        b.close()
    finally:
        ch.stop()
    return out, chdb_backend


def bytes_per_row(store: Any) -> dict[str, dict[str, int]]:
    """Rows and bytes (compressed, uncompressed) per table after the ingest, merged as the engine keeps them."""
    store.query("OPTIMIZE TABLE otel_traces FINAL", "CSV")
    store.query("OPTIMIZE TABLE llm_calls FINAL", "CSV")
    csv = store.query(
        "SELECT table, sum(rows), sum(data_compressed_bytes), sum(data_uncompressed_bytes) FROM system.parts "
        "WHERE active AND database = currentDatabase() GROUP BY table ORDER BY table",
        "CSV",
    )
    out = {}
    for line in bytes(csv).decode().splitlines():
        table, rows, comp, raw = line.split(",")
        if int(rows):
            out[table.strip('"')] = {"rows": int(rows), "compressed": int(comp), "uncompressed": int(raw)}
    return out


SYNTH_SQL = """INSERT INTO llm_calls (timestamp, trace_id, span_id, service, provider, api, operation, request_model,
    response_model, stream, status_code, outcome, error_type, mid_stream_error, finish_reason, input_tokens,
    output_tokens, cache_read_tokens, usage_source, cost_usd, ttfb_ms, ttft_ms, duration_ms, decode_ms, itl_p50_ms,
    itl_p95_ms, output_tokens_per_s, user_id, feature, api_key_id, request_hash, retry_after_s, overhead_ms)
SELECT now64(6) - toIntervalMillisecond(rand() % (30 * 86400000)) AS ts, hex(rand64()), hex(rand()),
    ['checkout-api', 'support-bot', 'search-svc'][rand() % 3 + 1],
    ['openai', 'anthropic', 'gcp.gemini'][rand() % 3 + 1], 'openai.chat_completions', 'chat',
    ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4-5', 'gemini-2.0-flash', 'o3-mini'][rand() % 5 + 1], '', rand() % 5 > 0,
    [200, 200, 200, 200, 200, 200, 200, 429, 500, 529][rand() % 10 + 1], if(rand() % 20 = 0, 'error', 'ok'),
    if(rand() % 20 = 0, ['rate_limited', 'quota_exhausted', 'overloaded', 'server_error'][rand() % 4 + 1], ''),
    rand() % 100 = 0, ['stop', 'stop', 'stop', 'length', 'tool_calls'][rand() % 5 + 1], rand() % 4000,
    rand() % 800, rand() % 2000, 'provider', (rand() % 10000) / 1e6, 50 + rand() % 200, 200 + rand() % 3000,
    500 + rand() % 20000, rand() % 10000, 5 + rand() % 30, 20 + rand() % 60, 20 + rand() % 100,
    concat('user-', toString(rand() % 500)), ['search', 'summarize', 'chat', 'extract', 'classify'][rand() % 5 + 1],
    hex(rand() % 8), hex(rand() % 100000), if(rand() % 50 = 0, 1.5, NULL), 0.05 + (rand() % 1000) / 1e4
FROM numbers({n})"""


def _defaults(board: dict[str, Any]) -> dict[str, list[str]]:
    """Each of the board's variables at its default, as a dashboard opens (All where it may be All)."""
    from llmtap.admin.macros import ALL

    out: dict[str, list[str]] = {}
    for v in board.get("templating", {}).get("list", []):
        value = v.get("current", {}).get("value", "")
        values = value if isinstance(value, list) else [value]
        out[v["name"]] = [ALL] if v.get("includeAll") else [str(x) for x in values]
    return out


def panels(store: Any, rows: int) -> list[tuple[str, str, float]]:
    sys.path.insert(0, str(ROOT / "dashboards"))
    from generate import build

    from llmtap.admin.macros import QueryContext, expand

    t0 = time.perf_counter()
    store.query("TRUNCATE TABLE llm_calls", "CSV")
    store.query("TRUNCATE TABLE llm_calls_hourly", "CSV")  # it rolls up llm_calls: the ingest's calls are gone
    for _ in range(max(rows // 1_000_000, 1)):
        store.query(SYNTH_SQL.format(n=min(rows, 1_000_000)), "CSV")
    print(f"  generated {rows:,} rows in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    # Time the panels on settled data, as a dashboard reads a month of rows: the bulk insert above leaves
    # background merges running for a while, and they share the cores with the queries.
    settle = time.monotonic() + 120
    while time.monotonic() < settle and store.query("SELECT count() FROM system.merges", "CSV").strip() != b"0":
        time.sleep(0.5)
    print(f"  merges settled after {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    now = time.time()
    out = []
    for board in build().values():
        if board["uid"] == "llmtap-trace":
            continue
        ctx = QueryContext(now - 30 * 86400, now, 6 * 3600, _defaults(board))
        for panel in board["panels"]:
            sql = expand(panel["targets"][0]["rawSql"], ctx)
            best = float("inf")
            for _ in range(3):
                t = time.perf_counter()
                store.query(sql, "Null")
                best = min(best, time.perf_counter() - t)
            out.append((board["title"], panel["title"], best * 1000))
    return out


# Both explain analyses as `llmtap explain-cost` / `explain-latency` run them, on the panels' rows: the defaults
# (the last 24 h against the same hours of the 7 days before) and the widest the 30 days allow (15 days against
# the 15 before: every call is in one of the periods).
EXPLAIN_PERIODS = (("24h", "7d"), ("15d", "previous"))


def explains(store: Any) -> list[tuple[str, str, float]]:
    import json

    from llmtap.admin.explain import Periods, explain_cost
    from llmtap.admin.explain_latency import explain_latency

    def rows(sql: str) -> list[dict[str, Any]]:
        return [json.loads(x) for x in store.query(sql, "JSONEachRow").splitlines()]

    out = []
    for window, baseline in EXPLAIN_PERIODS:
        periods = Periods.parse(window, baseline)
        for name in ("explain-cost --by model,feature", "explain-latency"):
            best = float("inf")
            for _ in range(3):
                t = time.perf_counter()
                if name.startswith("explain-cost"):
                    explain_cost(rows, periods, ["model", "feature"])
                else:
                    explain_latency(rows, periods, "duration", 0.95)
                best = min(best, time.perf_counter() - t)
            out.append((name, f"--window {window} --baseline {baseline}", best * 1000))
    return out
