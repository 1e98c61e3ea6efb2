"""Every panel and alert query runs on the real engine against seeded data and has the shape its panel expects;
a seeded cost regression fires the alert query and `llmtap check-cost`."""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import generate as dashboards
import pytest
import yaml
from helpers import LLMTAP

from llmtap.admin.macros import ALL, QueryContext, expand
from llmtap.admin.queries import RULES, report_sql
from llmtap.store.embedded import ChdbBackend
from llmtap.telemetry.semconv import otel_traces_row
from llmtap.testing import scenarios, synthetic

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # slow: runs with the e2e suite

ROOT = Path(__file__).resolve().parents[2]
NOW = time.time()


@pytest.fixture(scope="module")
def seeded(inproc_store: ChdbBackend) -> ChdbBackend:
    rows = [
        *synthetic.rows(30000, 8, end=NOW, avoid_windows=True),
        *synthetic.window_rows(600, 7, regression=synthetic.Regression("summarize", 2.0), end=NOW),
        *scenarios.other_rows(600, 8, end=NOW),  # not LLM calls: only their own panel shows them
    ]
    # a quota error in the last minutes, so the quota alert query has something to say
    q = next(synthetic.generate(1, NOW - 60, NOW - 30, seed=3))
    q.outcome, q.error_type, q.status_code, q.usage_source = "error", "quota_exhausted", 429, "none"
    q.input_tokens = q.output_tokens = q.cache_read_tokens = q.cache_write_tokens = q.reasoning_tokens = 0
    q.cost_usd = q.input_cost_usd = q.output_cost_usd = None
    rows.append(otel_traces_row(q))
    # a model no price source knows, in every filter the tests use: the unpriced panels have rows whatever the
    # seed drew (0.5% of chat calls, a handful in a filtered day)
    for provider in ("openai", "anthropic"):
        u = next(synthetic.generate(1, NOW - 3 * 3600, NOW - 3 * 3600 + 60, seed=5))  # outside every cost window
        u.provider, u.feature, u.request_model, u.response_model = provider, "summarize", "ft:internal-preview", ""
        u.outcome, u.error_type, u.usage_source, u.input_tokens = "ok", "", "provider", 900
        u.cost_usd = u.input_cost_usd = u.output_cost_usd = u.uncached_input_cost_usd = None
        rows.append(otel_traces_row(u))
    for i in range(0, len(rows), 10000):
        inproc_store.insert_spans(rows[i : i + 10000], f"dash-seed-{i}")
    return inproc_store


def run(store: ChdbBackend, sql: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in store.query(sql, "JSONEachRow").splitlines()]


def types(store: ChdbBackend, sql: str) -> dict[str, str]:
    out = store.query(f"DESCRIBE ({sql})", "JSONEachRow")
    return {d["name"]: d["type"] for d in (json.loads(x) for x in out.splitlines())}


def test_committed_files_are_what_the_builder_builds() -> None:
    for name, board in dashboards.build().items():
        assert json.loads((ROOT / "dashboards/json" / name).read_text()) == board, name
    committed = yaml.safe_load((ROOT / "dashboards/provisioning/alerting/llmtap.yaml").read_text())
    assert committed == dashboards.alert_provisioning()


def test_dashboards_follow_grafana_conventions() -> None:
    uids = set()
    for board in dashboards.build().values():
        assert board["schemaVersion"] >= 39 and board["id"] is None
        assert 8 <= len(board["uid"]) <= 40 and board["uid"] not in uids
        uids.add(board["uid"])
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids))
        for p in board["panels"]:
            g = p["gridPos"]
            assert g["x"] >= 0 and g["x"] + g["w"] <= 24
            assert p["datasource"]["uid"] == "clickhouse"
            if board["uid"] != "llmtap-trace":
                sql = p["targets"][0]["rawSql"]
                for var in ("service", "provider", "model", "feature"):
                    assert "$__conditionalAll(" in sql and f"${{{var}:singlequote}}" in sql, (p["title"], var)
    assert {"llmtap-overview", "llmtap-latency", "llmtap-cost", "llmtap-errors", "llmtap-calls"} <= uids


PANELS = [(b["uid"], p) for b in dashboards.build().values() for p in b["panels"]]
BOARDS = {b["uid"]: b for b in dashboards.build().values()}


def defaults(uid: str) -> dict[str, list[str]]:
    """The board's variables as a fresh dashboard has them: All, the custom default, empty text boxes."""
    out: dict[str, list[str]] = {}
    for v in BOARDS[uid]["templating"]["list"]:
        if v.get("includeAll"):
            out[v["name"]] = [ALL]
        elif v["type"] == "custom":
            out[v["name"]] = list(v["current"]["value"])
        else:
            out[v["name"]] = []
    return out


@pytest.mark.parametrize(("uid", "panel"), PANELS, ids=[f"{u}:{p['title']}" for u, p in PANELS])
@pytest.mark.parametrize("filtered", [False, True], ids=["all", "filtered"])
def test_panel_query_returns_the_shape_its_panel_expects(
    seeded: ChdbBackend, uid: str, panel: dict[str, Any], filtered: bool
) -> None:
    variables = defaults(uid)
    if filtered:
        variables.update(provider=["openai", "anthropic"], feature=["summarize"])
    if uid == "llmtap-trace":
        variables["trace_id"] = [run(seeded, "SELECT trace_id FROM llm_calls LIMIT 1")[0]["trace_id"]]
    ctx = QueryContext(NOW - 86400, NOW, 600, variables)
    target = panel["targets"][0]
    sql = expand(target["rawSql"], ctx)
    assert "$" not in sql.replace("$__", "") or "'$" in sql
    rows = run(seeded, sql)
    assert rows, f"{panel['title']} returned no rows"
    cols = types(seeded, sql)
    numeric = [c for c, t in cols.items() if re.search(r"Int|Float|Decimal", t)]
    kind = panel["type"]
    if target["format"] == 0:  # time series: a time column, then numbers (long format may add a label)
        assert next(iter(cols)) == "time" and "DateTime" in cols["time"]
        assert numeric
        times = [r["time"] for r in rows]
        assert times == sorted(times)
    elif kind == "stat":
        assert len(rows) == 1 and len(numeric) == 1
    elif kind == "barchart":
        assert any("String" in t for t in cols.values()) and numeric
    elif kind == "table":
        assert len(cols) >= 3
    elif kind == "traces":
        assert {
            "traceID",
            "spanID",
            "parentSpanID",
            "serviceName",
            "operationName",
            "startTime",
            "duration",
            "tags",
            "serviceTags",
            "statusCode",
        } <= set(cols)
    if filtered and "provider" in cols:
        assert {r["provider"] for r in rows} <= {"openai", "anthropic"}


@pytest.mark.parametrize("rule", RULES, ids=[r.uid for r in RULES])
def test_alert_query_runs_and_has_a_value_column(seeded: ChdbBackend, rule: Any) -> None:
    sql = expand(rule.sql, QueryContext(NOW - 900, NOW))
    cols = types(seeded, sql)  # the provisioned text (at now()), as Grafana runs it
    assert "value" in cols and re.search(r"Int|Float", cols["value"])
    assert any("String" in t for c, t in cols.items() if c != "value")  # labels for the alert instances
    assert types(seeded, rule.sql_at(NOW)) == cols
    assert run(seeded, rule.sql_at(NOW)), rule.uid  # at the seed's time, however long the suite took to get here


def test_seeded_regression_fires_the_cost_alert_queries(seeded: ChdbBackend) -> None:
    for uid in ("llmtap-cost-per-hour-regression", "llmtap-cost-per-call-regression"):
        rule = next(r for r in RULES if r.uid == uid)
        rows = run(seeded, rule.sql_at(NOW))
        firing = {(r["model"], r["feature"]) for r in rows if r["value"] > rule.threshold}
        assert firing and {f for _, f in firing} == {"summarize"}, (uid, firing)
        assert any(r["feature"] != "summarize" for r in rows)  # other groups were evaluated, and stayed quiet


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LLMTAP, *args], capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("regressed", [True, False], ids=["regression", "quiet"])
def test_check_cost(tmp_path: Path, regressed: bool) -> None:
    data = str(tmp_path / "data")
    seed = ["seed", "--data-dir", data, "--calls", "2000", "--days", "7", "--windows", "1000"]
    if regressed:
        seed += ["--regression", "summarize:1.5"]
    r = cli(*seed)
    assert r.returncode == 0, r.stderr
    r = cli(  # no sidecar runs on the data dir: its store is read directly
        "check-cost",
        "--window",
        "1h",
        "--baseline",
        "7d",
        "--threshold",
        "20%",
        "--by",
        "model,feature",
        "--data-dir",
        data,
    )
    lines = r.stdout.splitlines()
    flagged = [ln for ln in lines if ln.endswith("REGRESSION")]
    assert "current_usd" in lines[1] and "baseline_usd" in lines[1] and "ratio" in lines[1]
    if regressed:
        assert r.returncode == 1, r.stdout + r.stderr
        assert flagged and all(" summarize " in f for f in flagged)
        assert all(float(f.split()[-2]) == pytest.approx(1.5, abs=0.01) for f in flagged)  # per-call ratio
    else:
        assert r.returncode == 0 and not flagged, r.stdout
    assert len(lines) > 4  # groups were compared
    gate = ["check-cost", "--window", "1h", "--baseline", "7d", "--by", "model,feature", "--data-dir", data]
    same = cli(*gate, "--threshold", "0.2")  # a fraction: the same 20 %
    again = same.stdout.splitlines()
    # the same threshold, verdict and flagged groups (the window is "the last hour" of each run: a seeded call at
    # its edge may have moved between the two runs, so the counts are not compared)
    assert (same.returncode, again[0]) == (r.returncode, lines[0]) and "threshold +20%" in lines[0]
    assert [f.split()[:2] for f in again if f.endswith("REGRESSION")] == [f.split()[:2] for f in flagged]
    if regressed:  # a bare 20 would have been +2000 %, letting the regression through: refused instead
        bare = cli(*gate, "--threshold", "20")
        assert bare.returncode == 2 and bare.stdout == ""
        assert bare.stderr.strip().splitlines() == [
            "llmtap check-cost: argument --threshold: '20' is ambiguous: write a percentage (20%) or a fraction "
            "(0.2); a bare number is a fraction and must be at most 1 (see llmtap check-cost --help)"
        ]


def test_a_call_earlier_in_the_same_second_is_in_the_window(inproc_store: ChdbBackend) -> None:
    """The rules and check-cost evaluate at ``NOW`` with the timestamps' precision: ``timestamp <= now()`` (whole
    seconds) left out a call made earlier in the evaluation's own second — check-cost right after a call counted 0."""
    from llmtap.admin.queries import cost_regression_sql

    while time.time() % 1 > 0.3:  # early in a second: the row and the query share it (that is the case)
        time.sleep(0.02)
    service = f"same-second-{time.time_ns()}"
    r = next(synthetic.generate(1, time.time() - 0.002, time.time() - 0.001, seed=11, steady=True))
    r.service, r.outcome, r.error_type = service, "ok", ""
    inproc_store.insert_spans([otel_traces_row(r)], service)
    (row,) = run(inproc_store, cost_regression_sql(3600, 7, (), 0, f"service = '{service}'"))
    assert row["current_calls"] == 1


def test_check_cost_bad_input() -> None:
    r = cli("check-cost", "--window", "soon")
    assert r.returncode != 0 and "duration" in r.stderr
    r = cli("check-cost", "--by", "colour")
    assert r.returncode != 0 and "--by takes" in r.stderr


@pytest.mark.parametrize(
    ("var", "value", "column"),
    [
        ("outcome", "error", "outcome"),
        ("error_type", "rate_limited", "error_type"),
        ("tenant", "globex", "tenant"),
        ("user", "user-7", "user_id"),
        ("session", None, "session_id"),
        ("request_id", None, "request_id"),
        ("search", "synthetic overloaded", "error_type"),
    ],
)
def test_calls_explorer_filters(seeded: ChdbBackend, var: str, value: str | None, column: str) -> None:
    panel = next(p for p in BOARDS["llmtap-calls"]["panels"] if p["title"] == "Calls")
    some = run(
        seeded, "SELECT session_id, request_id FROM llm_calls WHERE timestamp >= now() - INTERVAL 1 DAY LIMIT 1"
    )[0]
    value = value or some[column]
    variables = defaults("llmtap-calls") | {var: [value]}
    rows = run(seeded, expand(panel["targets"][0]["rawSql"], QueryContext(NOW - 86400, NOW, 600, variables)))
    assert rows
    if var == "search":
        assert {r["error_type"] for r in rows} == {"overloaded"}
    else:
        assert {r[column] for r in rows} == {value}
    unfiltered = run(
        seeded, expand(panel["targets"][0]["rawSql"], QueryContext(NOW - 86400, NOW, 600, defaults("llmtap-calls")))
    )
    assert any(r[column] != (value if var != "search" else "overloaded") for r in unfiltered)  # it did filter


OTHER_PANEL = "llmtap-errors:Other requests (not LLM calls)"


def test_other_requests_change_no_llm_figure(seeded: ChdbBackend) -> None:
    """Issue #31: Claude Code's event logging answered 404 by a mock made a 15% error rate with no LLM call failing.
    A burst of such requests (``api = ''``) in the last minutes changes no panel, alert rule, report figure or hourly
    rollup sum — except the other-requests panel, which shows them."""
    queries = {
        f"{uid}:{p['title']}": expand(p["targets"][0]["rawSql"], QueryContext(NOW - 86400, NOW, 600, defaults(uid)))
        for uid, p in PANELS
        if uid != "llmtap-trace"
    }
    queries |= {r.uid: r.sql_at(NOW) for r in RULES}
    queries |= {f"report:{k}": q for k, q in report_sql(30 * 86400).items()}
    queries["hourly"] = "SELECT sum(calls) AS n, sum(errors) AS errors, sum(cost_usd_sum) AS c FROM llm_calls_hourly"

    def settle() -> None:
        """One part per partition, read by one thread: the engine's sums add and ``quantile()`` samples the LLM
        calls in the same order before and after the burst (otherwise its parts and merges change that order: a
        p95 estimated 2% apart, a rounded figure one unit apart), so only what the queries select can differ."""
        tables = "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree'"
        for t in run(seeded, tables):
            seeded.query(f"OPTIMIZE TABLE `{t['name']}` FINAL")

    def results() -> dict[str, list[dict[str, Any]]]:
        return {k: run(seeded, f"{q}\nSETTINGS max_threads = 1") for k, q in queries.items()}

    def same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
        """Equal rows in any order, floats within 1e-6 (sums over new parts add in another order, and a
        difference of two such sums loses digits); ``quantile()``'s figures within 1%: the engine's quantile is
        estimated from a sample whose draw follows the table's parts, which the burst's insert changes."""

        def key(r: dict[str, Any]) -> str:
            exact = {c: v for c, v in r.items() if not isinstance(v, float) and not approx(c)}
            return json.dumps(exact, sort_keys=True)

        def approx(c: str) -> bool:
            return re.search(r"(^|_)p\d\d(_|$)", c) is not None

        def close(c: str, x: Any, y: Any) -> bool:
            if approx(c) and isinstance(x, int | float) and isinstance(y, int | float):
                return math.isclose(x, y, rel_tol=0.01, abs_tol=1)
            return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9) if isinstance(x, float) else x == y

        pairs = zip(sorted(a, key=key), sorted(b, key=key), strict=False)
        return len(a) == len(b) and all(r.keys() == q.keys() and all(close(c, r[c], q[c]) for c in r) for r, q in pairs)

    settle()
    before, again = results(), results()
    stable = {k for k in queries if same(before[k], again[k])}  # `any()` and LIMIT ties may differ run to run
    assert OTHER_PANEL in stable and len(stable) >= 0.8 * len(queries), set(queries) - stable
    burst = [otel_traces_row(r) for r in scenarios.other_requests(300, NOW - 900, NOW - 60, seed=99)]
    assert {r.status_code for r in scenarios.other_requests(300, NOW - 900, NOW - 60, seed=99)} == {200, 404}
    seeded.insert_spans(burst, "dash-other-burst")
    settle()
    after = results()
    assert {k for k in stable if not same(after[k], before[k])} == {OTHER_PANEL}
    assert sum(r["requests"] for r in after[OTHER_PANEL]) == 300 + sum(r["requests"] for r in before[OTHER_PANEL])
