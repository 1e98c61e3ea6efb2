"""The read-only SQL guard, decided by the engine: a corpus of bypass attempts against the real chDB parser.

Every attempt found against the earlier string guard is here (finding 0: a heredoc hides a quote
from a tokenizer, so ``INTO OUTFILE`` and ``INSERT INTO FUNCTION file(...)`` wrote files, one of
them a ``.pth`` that runs code; finding 1: table functions and tricks it missed read the CA key,
``/proc/self/environ`` and the network), plus every table function and every denied function of
the engine version in use, read from its own ``system.table_functions`` / ``system.functions``.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from llmtap.admin import QueryRefused, Reads, pages, queries, viewer
from llmtap.admin.explain import Periods
from llmtap.admin.explain_sql import explain_cost_sql
from llmtap.admin.latency_sql import explain_latency_sql
from llmtap.admin.sqlfunctions import DATA, classify, engine_functions, load
from llmtap.admin.sqlguard import ALLOWED_TABLES
from llmtap.store.embedded import ChdbBackend
from llmtap.store.readonly import QueryLimits, param_value

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop


@pytest.fixture
def reads(inproc_store: ChdbBackend) -> Reads:
    return Reads(inproc_store)


ACCEPTED = [
    "SELECT 1",
    "select * from llm_calls where feature = 'DROP TABLE x; INSERT'",
    "WITH a AS (SELECT 1) SELECT * FROM a",
    "WITH recent AS (SELECT * FROM llm_calls WHERE timestamp > now() - INTERVAL 1 DAY) SELECT count() FROM recent",
    "SELECT provider, count() FROM llmtap.llm_calls GROUP BY provider",
    "SELECT count() FROM llm_calls UNION ALL SELECT count() FROM otel_traces",
    "SELECT c.provider FROM llm_calls AS c JOIN llm_calls_hourly AS h ON c.provider = h.provider LIMIT 1",
    "SELECT countIf(outcome = 'error'), quantilesIf(0.5, 0.95)(ttft_ms, stream), sumArray([1, 2]) FROM llm_calls",
    "SELECT arrayMap(x -> x * 2, [1, 2]), CASE status_code WHEN 200 THEN 'ok' ELSE 'no' END FROM llm_calls",
    "SELECT row_number() OVER (PARTITION BY provider ORDER BY timestamp) FROM llm_calls",
    "SELECT * FROM llm_content LIMIT 1",
    "SELECT provider FROM llm_calls WHERE provider IN (SELECT provider FROM llm_calls_hourly)",
    "SHOW TABLES",
    "SHOW TABLES FROM llmtap",
    "SHOW COLUMNS FROM llm_calls",
    "DESCRIBE TABLE llm_calls",
    "DESC llm_calls",
    "SHOW CREATE TABLE llm_calls",
    "EXISTS TABLE llm_calls",
    "EXPLAIN SELECT 1",
    "EXPLAIN PLAN actions = 1 SELECT count() FROM llm_calls",
    "SELECT 1;",
    "SELECT count() FROM llm_calls -- ; DROP TABLE llm_calls",
    "SELECT $$it's a heredoc$$",
]


@pytest.mark.parametrize("sql", ACCEPTED)
def test_reads_are_accepted_and_run(reads: Reads, sql: str) -> None:
    reads.run(sql, "TSV")


SECRET_DIR = "/tmp/llmtap-guard-probe"
BYPASSES = [
    # finding 0: file writes (the heredoc hid a quote from the old tokenizer)
    f"SELECT $$'$$ INTO OUTFILE '{SECRET_DIR}/out.txt' --'",
    f"SELECT $$'$$; INSERT INTO FUNCTION file('{SECRET_DIR}/x.pth', 'LineAsString', 'l String') SELECT 'import os' --'",
    f"INSERT INTO FUNCTION file('{SECRET_DIR}/a.csv', 'CSV', 'a Int8') SELECT 1",
    f"SELECT 1 INTO OUTFILE '{SECRET_DIR}/b.txt'",
    f"SELECT 1 INTO OUTFILE '{SECRET_DIR}/c.txt' APPEND",
    f"SELECT 1 INTO OUTFILE '{SECRET_DIR}/d.txt' TRUNCATE FORMAT CSV",
    f"SELECT 1 INTO OUTFILE '{SECRET_DIR}/e.txt' AND STDOUT",
    f"EXPLAIN SELECT 1 INTO OUTFILE '{SECRET_DIR}/f.txt'",
    f"SELECT 1 /* /* nested */ */ INTO OUTFILE '{SECRET_DIR}/g.txt'",
    f"SELECT 1; INSERT INTO FUNCTION file('{SECRET_DIR}/h.csv') SELECT 1",
    # finding 1: reads of the CA key, the install secret, the environment, the command line, the data dir
    "SELECT * FROM `file`('{data}/ca/mitmproxy-ca.pem', 'LineAsString')",
    "SELECT * FROM file ('{data}/install-secret', 'RawBLOB')",
    "SELECT file('{data}/ca/mitmproxy-ca.pem')",
    "SELECT `file`('/proc/self/environ')",
    "SELECT * FROM file('/proc/self/environ', 'RawBLOB')",
    "SELECT * FROM file('/proc/self/cmdline', 'RawBLOB')",
    "SELECT * FROM filesystem('{data}')",
    "DESCRIBE file('/proc/self/environ', 'RawBLOB')",
    "DESCRIBE TABLE file('/etc/passwd')",
    "SELECT 1 WHERE 'x' IN file('/etc/passwd', 'LineAsString')",
    "EXPLAIN SELECT * FROM file('/etc/passwd')",
    "EXPLAIN ESTIMATE SELECT * FROM url('http://127.0.0.1:1/')",
    # ... the network (SSRF, exfiltration)
    "SELECT * FROM url('http://127.0.0.1:1/x', 'RawBLOB')",
    "SELECT * FROM oss('http://127.0.0.1:1/x', 'RawBLOB')",
    "SELECT * FROM s3('http://127.0.0.1:1/x', 'RawBLOB')",
    "SELECT * FROM remote('127.0.0.1:1', system.one)",
    "SELECT aiGenerate('say hi')",
    # ... other databases, the engine's state, settings
    "SELECT * FROM system.users",
    "SELECT * FROM system.processes",
    "SELECT * FROM `system`.`tables`",
    "SELECT * FROM default.t",
    "SELECT 1 WHERE 'default' IN system.users",
    "SHOW CREATE TABLE system.users",
    "SHOW TABLES FROM system",
    "SHOW PROCESSLIST",
    "SHOW GRANTS",
    "SHOW USERS",
    "SHOW SETTINGS LIKE '%'",
    "SELECT getSetting('readonly')",
    "SELECT getClientHTTPHeader('authorization')",
    "SELECT currentUser(), hostName()",
    "SELECT dictGet('d', 'x', 1)",
    "SELECT joinGet('llm_calls', 'x', 1)",
    "SELECT sleepEachRow(3) FROM llm_calls",
    "SELECT * FROM merge('system', '.*')",
    "SELECT * FROM view(SELECT * FROM system.users)",
    "SELECT * FROM eval('x')",
    "SELECT * FROM numbers(10)",
    "SELECT * FROM llm_calls SETTINGS readonly = 0",
    "SELECT 1 SETTINGS max_execution_time = 100000",
    "SELECT 1 FORMAT JSON",
    # writes, DDL, everything that is not a read
    "INSERT INTO llm_calls (service) VALUES ('x')",
    "DROP TABLE llm_calls",
    "ALTER TABLE llm_calls DELETE WHERE 1",
    "TRUNCATE TABLE llm_calls",
    "CREATE TABLE x (a Int8) ENGINE = Memory",
    "SET readonly = 0",
    "SYSTEM SHUTDOWN",
    "KILL QUERY WHERE 1",
    "OPTIMIZE TABLE llm_calls",
    "BACKUP TABLE llm_calls TO File('x')",
    "USE system",
    "GRANT ALL ON *.* TO default",
    "SELECT 1; SELECT 2",
    "",
    "   ",
    "SELECT 'unterminated",
]


@pytest.mark.parametrize("sql", BYPASSES)
def test_bypass_attempts_are_refused_and_touch_nothing(reads: Reads, inproc_store: ChdbBackend, sql: str) -> None:
    Path(SECRET_DIR).mkdir(exist_ok=True)
    sql = sql.replace("{data}", str(inproc_store.path.parent))
    with pytest.raises(QueryRefused):
        reads.run(sql, "TSV")
    assert list(Path(SECRET_DIR).iterdir()) == []


def test_every_table_function_of_the_engine_is_refused(reads: Reads, inproc_store: ChdbBackend) -> None:
    names = inproc_store.query("SELECT name FROM system.table_functions", "TSV").decode().split()
    assert len(names) > 50 and {"file", "url", "s3", "remote", "executable", "python", "filesystem"} <= set(names)
    for name in names:
        for sql in (
            f"SELECT * FROM {name}('x')",
            f"SELECT * FROM `{name}`()",
            f"SELECT * FROM llm_calls JOIN {name}('x') AS t ON 1",
            f"SELECT * FROM (SELECT * FROM {name}('x'))",
            f"WITH t AS (SELECT * FROM {name}('x')) SELECT * FROM t",
            f"DESCRIBE {name}('x')",
            f"INSERT INTO FUNCTION {name}('x') SELECT 1",
        ):
            with pytest.raises(QueryRefused):
                reads.run(sql, "TSV")


def test_every_denied_function_is_refused(reads: Reads) -> None:
    denied = load().denied
    assert {"file", "getSetting", "dictGet", "aiGenerate", "joinGet", "currentUser"} <= set(denied)
    for name in denied:
        with pytest.raises(QueryRefused, match="not allowed"):
            reads.run(f"SELECT {name}('x')", "TSV")
        with pytest.raises(QueryRefused):
            reads.run(f"SELECT `{name}`('x') FROM llm_calls", "TSV")


def test_the_function_list_is_the_engine_s(inproc_store: ChdbBackend) -> None:
    """Every function the engine has is classified, as the rules classify it: a new engine version fails here
    until ``python -m llmtap.admin.sqlfunctions`` is rerun and its new functions reviewed."""
    version, rows, combinators = engine_functions(inproc_store.query)
    data = json.loads(DATA.read_text())
    assert data["engine"] == version
    assert {k: v for k, v in data.items() if k != "engine"} == classify(rows, combinators)
    fns = load()
    assert set(fns.allowed) | set(fns.denied) == {r["name"] for r in rows}
    assert not set(fns.allowed) & set(fns.denied)


def test_panels_variables_and_analysis_sql_all_pass(reads: Reads) -> None:
    """The guard refuses none of llmtap's own SQL: every panel and variable of every dashboard, the alert
    rules, report, check-cost, explain-cost/-latency and the call and session pages (run on the store, so the
    engine accepts them too)."""
    boards = viewer.load_dashboards()

    def run(sql: str, fmt: str, params: dict[str, str]) -> bytes:
        return reads.run(sql, fmt, params)

    n = 0
    for uid, board in boards.items():
        for panel in board["panels"]:
            for chosen in ({}, {"provider": ["openai", "it's"], "model": ["a\\b"], "trace_id": "x' OR 1=1 --"}):
                viewer.panel_data(run, boards, {"uid": uid, "panel": panel["id"], "vars": chosen})
                n += 1
        for var in board.get("templating", {}).get("list", []):
            if var["type"] == "query":
                viewer.variable_values(run, boards, {"uid": uid, "name": var["name"]})
                n += 1
    for rule in queries.RULES:
        reads.run(rule.sql, "JSONEachRow")
    for sql in queries.report_sql(86400).values():
        reads.run(sql, "JSONEachRow")
    reads.run(queries.cost_regression_sql(where="service = {service:String}"), "JSONEachRow", {"service": "x"})
    # the viewer's own pages: the explain analyses (every dimension, both baselines) and a call, a session
    for by in (["model", "feature"], ["provider"], ["service"], ["user"], ["key"], ["tenant"]):
        for periods in (Periods.parse("24h", "7d"), Periods.parse("1h", "previous")):
            reads.run(explain_cost_sql(by, **periods.sql_args()), "JSONEachRow")
    for metric in ("duration", "ttft"):
        reads.run(explain_latency_sql(metric=metric), "JSONEachRow")
    for sql in (pages.CALL_SQL, pages.ATTEMPTS_SQL, pages.CONTENT_SQL):
        reads.run(sql, "JSONEachRow", {"trace_id": "x' OR 1=1 --"})
    reads.run(pages.SESSION_SQL, "JSONEachRow", {"session_id": "x' OR 1=1 --"})
    assert n > 50


@pytest.mark.parametrize(
    "value", ["plain", "it's", "back\\slash", "new\nline\ttab\r", "nul\x00", "{p0:String}", "ü日本"]
)
def test_parameters_are_bound_not_spliced(reads: Reads, value: str) -> None:
    out = reads.run("SELECT {v:String} AS v", "JSONEachRow", {"v": value})
    assert json.loads(out)["v"] == value
    assert param_value(value).count("\n") == 0


def test_parameters_must_be_used_and_well_formed(reads: Reads) -> None:
    with pytest.raises(QueryRefused, match="does not appear"):
        reads.run("SELECT 1", "TSV", {"x": "1"})
    with pytest.raises(QueryRefused):
        reads.run("SELECT {x:String}", "TSV", {"x y": "1"})
    with pytest.raises(QueryRefused):
        reads.run("SELECT 1", "TSV; DROP")


def test_the_engine_itself_runs_admin_reads_read_only(inproc_store: ChdbBackend) -> None:
    """Below the guard: the read session refuses writes and setting changes on its own (defence in depth)."""
    for sql in ("INSERT INTO llm_calls (service) VALUES ('x')", "SET readonly = 0", "SELECT 1 SETTINGS readonly = 0"):
        with pytest.raises(Exception, match=r"(?i)readonly"):
            inproc_store.read(sql, "TSV")
    assert set(ALLOWED_TABLES) <= set(inproc_store.read("SHOW TABLES", "TSV").decode().split())


LONG = (
    "SELECT count() FROM llm_calls ARRAY JOIN range(1000000) AS a ARRAY JOIN range(1000) AS b WHERE sipHash64(a, b) = 1"
)


def test_a_long_query_is_stopped_by_the_engine(inproc_store: ChdbBackend) -> None:
    inproc_store.insert_spans([], "noop")
    bounded = ChdbBackend(inproc_store.path, limits=QueryLimits(max_execution_time=1))
    try:
        rows = [json.loads(x) for x in bounded.read("SELECT count() AS n FROM llm_calls", "JSONEachRow").splitlines()]
        assert rows
        t = time.monotonic()
        with pytest.raises(Exception, match=r"(?i)timeout|time limit|elapsed"):
            bounded.read("SELECT count() FROM numbers(100000000000) WHERE sipHash64(number) = 1", "TSV")
        assert time.monotonic() - t < 5
    finally:
        bounded.close()


def test_cancel_stops_a_running_query_and_the_writer_never_waits(inproc_store: ChdbBackend) -> None:
    """A read holds its own session: an insert meanwhile is not delayed, and cancel() ends the read at once."""
    errors: list[str] = []

    def long_read() -> None:
        try:
            inproc_store.read("SELECT count() FROM numbers(100000000000) WHERE sipHash64(number) = 1", "TSV", tag="t1")
        except Exception as e:
            errors.append(str(e))

    th = threading.Thread(target=long_read)
    th.start()
    time.sleep(0.5)
    t = time.monotonic()
    inproc_store.insert_spans([], "noop-during-read")
    inproc_store.query("SELECT 1", "TSV")  # the writer's session answers meanwhile
    assert time.monotonic() - t < 1.0
    t = time.monotonic()
    inproc_store.cancel("t1")
    th.join(10)
    assert not th.is_alive() and time.monotonic() - t < 3
    assert errors and "cancel" in errors[0].lower()
