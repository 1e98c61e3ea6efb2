"""The guard against the engine's own grammar: every function of ``system.functions`` in every syntactic position
the parser accepts, and random queries checked by the engine's analyzer (issue #26, finding: ``APPLY(file)``).

Two kinds of evidence:

- **Exhaustive**: each function name (every one the engine lists, allowed or denied, and each denied one upper-cased,
  backquoted and with each aggregate combinator) is put in each position of :data:`POSITIONS` — a call in every
  clause, a window, a lambda body, a bare identifier and a function reference (``arrayMap(f, …)``), ``APPLY`` in
  each of its forms, ``COLUMNS`` matchers, ``REPLACE``, ``INTERPOLATE``, ``WITH FILL``, parametric calls, a name
  inside a value (``arrayReduce``, ``AggregateFunction`` types), table-function positions, ``EXPLAIN``. Whenever
  the engine's parser accepts the text, a denied name must be refused. Each position is first shown to be real: an
  allowed function there is accepted and the engine's analyzer resolves it as a call.
- **Oracle**: for queries the guard accepts, ``EXPLAIN QUERY TREE`` (the engine's analyzer, which resolves every
  identifier, alias, ``APPLY`` and combinator to the functions that would run) names no denied function and no
  table function. Fed by hypothesis: random positions nested in random positions, and mutations of every word of
  llmtap's own panel SQL into a denied name. (The analyzer does not show an aggregate named inside a value, such
  as ``arrayReduce('f', …)``: those positions are covered by the exhaustive test.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmtap.admin import QueryRefused, Reads, viewer
from llmtap.admin.sqlfunctions import load
from llmtap.admin.sqlguard import Guard
from llmtap.store.embedded import ChdbBackend

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop

T = "llm_calls"
S = f"(SELECT feature AS x, input_tokens AS n FROM {T})"  # a subquery with a String and a UInt64 column
# position id → (template with {f} for the function's name, an allowed function that runs there)
POSITIONS: dict[str, tuple[str, str | None]] = {
    "select": ("SELECT {f}(feature) FROM llm_calls", "lower"),
    "select-no-from": ("SELECT {f}('x')", "lower"),
    "where": ("SELECT 1 FROM llm_calls WHERE {f}(feature) = ''", "lower"),
    "prewhere": ("SELECT 1 FROM llm_calls PREWHERE {f}(feature) = ''", "lower"),
    "group-by": ("SELECT count() FROM llm_calls GROUP BY {f}(feature)", "lower"),
    "having": ("SELECT count() FROM llm_calls GROUP BY feature HAVING {f}(feature) = ''", "lower"),
    "order-by": ("SELECT feature FROM llm_calls ORDER BY {f}(feature)", "lower"),
    "limit-by": ("SELECT feature FROM llm_calls LIMIT 1 BY {f}(feature)", "lower"),
    "limit": ("SELECT feature FROM llm_calls LIMIT {f}(1)", "abs"),
    "qualify": ("SELECT feature FROM llm_calls QUALIFY {f}(feature) = ''", "lower"),
    "window-fn": ("SELECT {f}(input_tokens) OVER () FROM llm_calls", "max"),
    "window-partition": ("SELECT count() OVER (PARTITION BY {f}(feature)) FROM llm_calls", "lower"),
    "window-order": ("SELECT count() OVER (ORDER BY {f}(feature)) FROM llm_calls", "lower"),
    "named-window": ("SELECT count() OVER w FROM llm_calls WINDOW w AS (PARTITION BY {f}(feature))", "lower"),
    "array-join": ("SELECT a FROM llm_calls ARRAY JOIN [{f}(feature)] AS a", "lower"),
    "join-on": ("SELECT 1 FROM llm_calls AS a JOIN llm_calls AS b ON {f}(a.feature) = b.feature", "lower"),
    "with-expr": ("WITH {f}('x') AS y SELECT y", "lower"),
    "cte": ("WITH c AS (SELECT {f}(feature) FROM llm_calls) SELECT * FROM c", "lower"),
    "from-subquery": ("SELECT * FROM (SELECT {f}(feature) FROM llm_calls)", "lower"),
    "in-subquery": ("SELECT 1 FROM llm_calls WHERE feature IN (SELECT {f}(feature) FROM llm_calls)", "lower"),
    "scalar-subquery": ("SELECT (SELECT {f}('x'))", "lower"),
    "union": ("SELECT 1 UNION ALL SELECT {f}('x')", "length"),
    "case": ("SELECT CASE WHEN {f}(feature) = '' THEN 1 END FROM llm_calls", "lower"),
    "cast": ("SELECT CAST({f}(feature) AS String) FROM llm_calls", "lower"),
    "operator": ("SELECT -{f}(input_tokens) FROM llm_calls", "abs"),
    "interval": ("SELECT now() - INTERVAL {f}(1) DAY", "abs"),
    "grouping-sets": ("SELECT count() FROM llm_calls GROUP BY GROUPING SETS ((feature), ({f}(feature)))", "lower"),
    "lambda-body": ("SELECT arrayMap(y -> {f}(y), [feature]) FROM llm_calls", "lower"),
    "lambda-nested": ("SELECT arrayFold((acc, y) -> {f}(y), [feature], '') FROM llm_calls", "lower"),
    "function-reference": ("SELECT arrayMap({f}, [feature]) FROM llm_calls", "lower"),
    "bare-identifier": ("SELECT {f}", "currentDatabase"),
    "bare-identifier-from": ("SELECT {f} FROM llm_calls", "currentDatabase"),
    "apply": (f"SELECT * APPLY({{f}}) FROM {S}", "toString"),
    "apply-bare": (f"SELECT * APPLY {{f}} FROM {S}", "toString"),
    "apply-chained": (f"SELECT * APPLY(toString) APPLY({{f}}) FROM {S}", "lower"),
    "apply-parametric": (f"SELECT * APPLY({{f}}(0.5)) FROM (SELECT input_tokens FROM {T})", "quantile"),
    "apply-lambda": (f"SELECT * APPLY(y -> {{f}}(y)) FROM {S}", "toString"),
    "qualified-apply": (f"SELECT s.* APPLY({{f}}) FROM {S} AS s", "toString"),
    "columns-regexp-apply": (f"SELECT COLUMNS('x') APPLY({{f}}) FROM {S}", "lower"),
    "columns-list-apply": (f"SELECT COLUMNS(x) APPLY({{f}}) FROM {S}", "lower"),
    "columns-except-apply": (f"SELECT * EXCEPT (n) APPLY({{f}}) FROM {S}", "lower"),
    "replace": (f"SELECT * REPLACE ({{f}}(x) AS x) FROM {S}", "lower"),
    "interpolate": ("SELECT input_tokens AS n, feature FROM llm_calls ORDER BY n WITH FILL "
                    "INTERPOLATE (feature AS {f}(feature))", "lower"),
    "with-fill": ("SELECT input_tokens AS n FROM llm_calls ORDER BY n WITH FILL FROM {f}(0) TO 3", "abs"),
    "parametric": ("SELECT {f}(0.5)(input_tokens) FROM llm_calls", "quantile"),
    "combinator-if": ("SELECT {f}If(input_tokens, 1) FROM llm_calls", "max"),
    "combinator-state": ("SELECT {f}State(input_tokens) FROM llm_calls", "max"),
    "combinator-array": ("SELECT {f}Array([input_tokens]) FROM llm_calls", "max"),
    "combinator-chain": ("SELECT {f}ArrayIf([input_tokens], 1) FROM llm_calls", "max"),
    "value-array-reduce": ("SELECT arrayReduce('{f}', [1.0, 2.0])", "max"),
    "value-array-reduce-state": ("SELECT finalizeAggregation(arrayReduce('{f}State(0.5)', [1.0, 2.0]))", "quantile"),
    "value-initialize": ("SELECT finalizeAggregation(initializeAggregation('{f}State', 2.0))", "max"),
    "value-cast-type": ("SELECT finalizeAggregation(CAST(arrayReduce('maxState', [2.0]) AS "
                        "AggregateFunction({f}, Float64)))", "max"),
    "value-cast-op": ("SELECT finalizeAggregation(arrayReduce('maxState', [2.0])::AggregateFunction({f}, Float64))",
                      "max"),
    "explain": ("EXPLAIN SELECT {f}('x')", "lower"),
    "explain-syntax": ("EXPLAIN SYNTAX SELECT {f}('x')", "lower"),
    "explain-query-tree": ("EXPLAIN QUERY TREE SELECT {f}('x')", "lower"),
    "table-function": ("SELECT * FROM {f}('x')", None),
    "table-function-join": ("SELECT * FROM llm_calls JOIN {f}('x') AS t ON 1", None),
    "table-function-in": ("SELECT 1 FROM llm_calls WHERE feature IN {f}('x')", None),
    "table-function-cte": ("WITH t AS (SELECT * FROM {f}('x')) SELECT * FROM t", None),
}  # fmt: skip


def spellings(name: str) -> list[str]:
    """How a query can write the name: as is, upper-cased, backquoted, double-quoted."""
    return list(dict.fromkeys([name, name.upper(), f"`{name}`", f'"{name}"']))


class BatchParser:
    """The engine's parser over many queries per engine call (``formatQuerySingleLineOrNull``, ``parseQueryToJSON``),
    falling back to one call per query for what a batch cannot take. Same answers as the store's own parser."""

    def __init__(self, store: ChdbBackend) -> None:
        self.store = store
        self.canon: dict[str, str | None] = {}
        self.trees: dict[str, dict[str, Any] | None] = {}

    # What the batch takes a tree of: every statement that has one (DESCRIBE, SHOW CREATE, EXISTS have none, and
    # parseQueryToJSON's error on one would fail its whole batch: those are asked one at a time, as the guard does).
    TREED = ("SELECT", "WITH", "EXPLAIN")

    def prefetch(self, queries: Iterable[str], size: int = 2000) -> None:
        todo = [q for q in dict.fromkeys(queries) if q not in self.canon]
        for i in range(0, len(todo), size):
            part = todo[i : i + size]
            try:
                self._batch(part, self.TREED)
            except Exception:  # a statement of these whose tree the engine cannot write: trees of SELECTs only
                self._batch(part, ("SELECT", "WITH"))

    def _batch(self, part: list[str], treed: tuple[str, ...]) -> None:
        has_tree = " OR ".join(f"startsWith(c, '{p}')" for p in treed)
        sql = (
            f"SELECT q, c, if(c IS NULL OR NOT ({has_tree}), NULL, parseQueryToJSON(c)) AS j FROM "
            "(SELECT q, formatQuerySingleLineOrNull(q) AS c FROM "
            "(SELECT arrayJoin(JSONExtract({qs:String}, 'Array(String)')) AS q))"
        )
        raw = self.store.read(sql, "JSONEachRow", {"qs": json.dumps(part)})
        for line in raw.splitlines():
            row = json.loads(line)
            self.canon[row["q"]] = row["c"]
            if row["c"] is not None and row["j"] is not None:
                self.trees[row["c"]] = json.loads(row["j"])

    def parses(self, sql: str) -> bool:
        if sql not in self.canon:
            self.prefetch([sql])
        return self.canon[sql] is not None

    def canonical(self, sql: str) -> str:
        c = self.canon.get(sql)
        return c if c is not None else self.store.canonical(sql)

    def syntax_tree(self, sql: str) -> dict[str, Any] | None:
        return self.trees[sql] if sql in self.trees else self.store.syntax_tree(sql)

    def engine_names(self) -> frozenset[str]:
        return self.store.engine_names()


def resolved(store: ChdbBackend, canonical: str, params: Mapping[str, str] | None = None) -> set[str] | None:
    """What the engine's analyzer would run: every function and table function of ``EXPLAIN QUERY TREE``
    (None when it cannot analyze the query: then nothing of it runs either)."""
    if not canonical.startswith(("SELECT", "WITH")):
        return None
    try:
        out = store.read("EXPLAIN QUERY TREE " + canonical, "TSV", params).decode()
    except Exception:
        return None
    return set(re.findall(r"function_name: (\w+)", out)) | {
        "table:" + t for t in re.findall(r"table_function_name: (\w+)", out)
    }


# What the analyzer itself puts into a query tree (a query cannot call it: the guard refuses ``_`` names):
# ``_CAST`` for typed literals, ``__getScalar`` for a scalar subquery used as a value (explain-cost's SQL has one).
ANALYZER_INTERNAL = frozenset({"_CAST", "__getScalar"})


def denied_calls(calls: set[str]) -> set[str]:
    fns = load()
    return {c for c in calls if c.startswith("table:") or not (fns.is_allowed(c) or c in ANALYZER_INTERNAL)}


@pytest.fixture(scope="module")
def engine(inproc_store: ChdbBackend) -> dict[str, Any]:
    names = inproc_store.read("SELECT name FROM system.functions", "TSV").decode().split()
    tables = inproc_store.read("SELECT name FROM system.table_functions", "TSV").decode().split()
    combinators = inproc_store.read("SELECT name FROM system.aggregate_function_combinators", "TSV").decode().split()
    return {"functions": names, "tables": tables, "combinators": combinators}


def test_the_oracle_sees_what_the_guard_must_refuse(inproc_store: ChdbBackend) -> None:
    """The analyzer names the function behind an ``APPLY``, a function reference and a bare identifier (the
    three shapes the earlier guard let through), so the oracle below can fail."""
    for sql, fn in (
        ("SELECT * APPLY(file) FROM (SELECT '/nonexistent' AS x)", "file"),
        ("SELECT arrayMap(file, ['/nonexistent'])", "file"),
        ("SELECT user", "currentUser"),
        ("SELECT COLUMNS('x') APPLY(y -> hostName()) FROM (SELECT 1 AS x)", "hostName"),
    ):
        calls = resolved(inproc_store, inproc_store.canonical(sql))
        assert calls is not None and fn in calls and denied_calls(calls), sql


@pytest.mark.parametrize("position", sorted(POSITIONS))
def test_each_position_is_real(inproc_store: ChdbBackend, position: str) -> None:
    """An allowed function in the position is accepted and runs there (the analyzer resolves it; a name inside a
    value, which the analyzer does not show, computes the value); a table function position parses with a table
    function in it."""
    template, control = POSITIONS[position]
    reads = Reads(inproc_store)
    if control is None:
        probe = template.format(f="numbers" if "table" in position else "sum")
        inproc_store.canonical(probe)  # the engine parses it (raises otherwise)
        with pytest.raises(QueryRefused):
            reads.run(probe, "TSV")
        return
    sql = template.format(f=control)
    checked = reads.guard.check(sql)
    if position.startswith("explain"):
        return
    if position.startswith("value-"):
        expected = 2.0 if control == "max" else 1.5  # max of [1, 2] / [2]; quantile(0.5) of [1, 2]
        assert float(reads.run(sql, "TSV")) == expected
        return
    calls = resolved(inproc_store, checked.text)
    assert calls is not None and any(c.lower().startswith(control.lower()) for c in calls), (sql, calls)  # maxArray
    assert not denied_calls(calls)


@pytest.mark.slow
def test_every_function_in_every_position(inproc_store: ChdbBackend, engine: dict[str, Any]) -> None:
    """Every name of ``system.functions`` (each denied one also spelled four ways and with each combinator) and
    every table function, in every position: a denied name the parser accepts is always refused."""
    fns = load()
    denied = [n for n in engine["functions"] if not fns.is_allowed(n)]
    assert {"file", "currentUser", "user", "hostName", "getSetting", "dictGet"} <= set(denied)
    names = {n: n for n in engine["functions"]}  # spelling → the function it names
    for n in denied:
        for s in spellings(n):
            names.setdefault(s, n)
    for n in fns.denied_aggregates:
        for comb in engine["combinators"]:
            names.setdefault(n + comb, n)
    for t in engine["tables"]:
        names.setdefault(t, t)
    parser = BatchParser(inproc_store)
    guard = Guard(parser, inproc_store.db)
    refused = parsed = 0
    by_value: list[str] = []  # accepted with a denied ordinary function named inside a value
    aggregates = {n for n in denied if n.lower() in fns.denied_aggregates}
    for position, (template, _control) in POSITIONS.items():
        # a table position takes no table function at all (``IN f(…)`` also reads an allowed function's value); a value
        # names aggregates only; elsewhere a table function's name may be an allowed function (``format``)
        if position == "table-function-in":
            must_refuse = set(denied) | {t for t in engine["tables"] if not fns.is_allowed(t)}
        elif position.startswith("table"):
            must_refuse = set(denied) | set(engine["tables"])
        elif position.startswith("value-"):
            must_refuse = aggregates
        else:
            must_refuse = set(denied)
        queries = {template.format(f=s): n for s, n in names.items()}
        parser.prefetch(queries)
        for sql, fn in queries.items():
            if not parser.parses(sql):
                continue
            parsed += 1
            try:
                guard.check(sql)
            except QueryRefused:
                refused += 1
                continue
            assert fn not in must_refuse, f"accepted a denied name: {sql}"
            if fn in denied and position.startswith("value-"):
                by_value.append(sql)
    assert parsed > 50_000 and refused > 10_000  # the positions took the names: this was not vacuous
    for sql in by_value:  # the engine takes only an aggregate from a value: these run nothing
        with pytest.raises(Exception, match=r"[Aa]ggregate function"):
            inproc_store.read(sql, "TSV")
    assert len(by_value) > 100


def _word_mutants(sql: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", sql)]


@pytest.fixture(scope="module")
def corpus(inproc_store: ChdbBackend) -> list[tuple[str, dict[str, str]]]:
    """llmtap's own panel and variable SQL as it reaches the guard (macros expanded, values bound)."""
    reads = Reads(inproc_store)
    out: list[tuple[str, dict[str, str]]] = []

    def run(sql: str, fmt: str, params: dict[str, str]) -> bytes:
        out.append((sql, dict(params)))
        return reads.run(sql, fmt, params)

    boards = viewer.load_dashboards()
    for uid, board in boards.items():
        for panel in board["panels"]:
            viewer.panel_data(run, boards, {"uid": uid, "panel": panel["id"], "vars": {}})
    assert len(out) > 40
    return out


DENIED_SAMPLE = sorted({"file", "currentUser", "user", "hostName", "getSetting", "dictGet", "joinGet", "sleep",
                        "getClientHTTPHeader", "stochasticLinearRegression", "fuzzQuery", "version", "url",
                        "s3", "remote", "executable", "numbers", "FILE", "`file`"})  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutating_any_word_of_llmtap_sql_runs_no_denied_function(
    inproc_store: ChdbBackend, corpus: list[tuple[str, dict[str, str]]], data: st.DataObject
) -> None:
    """Any word of any panel query replaced by a denied name (or a call of one): refused, or — where the engine
    still parses and the guard accepts it (a word inside a string value) — the analyzer runs no denied function."""
    sql, params = data.draw(st.sampled_from(corpus))
    start, end = data.draw(st.sampled_from(_word_mutants(sql)))
    name = data.draw(st.sampled_from(DENIED_SAMPLE))
    shape = data.draw(st.sampled_from(["{n}", "{n}(x)", "{n}('x')", "arrayMap({n}, ['x'])"]))
    mutant = sql[:start] + shape.format(n=name) + sql[end:]
    reads = Reads(inproc_store)
    try:
        checked = reads.guard.check(mutant)
    except QueryRefused:
        return
    calls = resolved(inproc_store, checked.text, params)
    assert calls is None or not denied_calls(calls), (mutant, calls)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_nested_positions_run_no_denied_function(
    inproc_store: ChdbBackend, engine: dict[str, Any], data: st.DataObject
) -> None:
    """A position inside a position inside a position, each with a random function of the engine (allowed or
    not): whatever the guard accepts, the analyzer resolves to allowed functions only."""
    scalar = [p for p, (t, c) in POSITIONS.items() if c == "lower" and "{f}('x')" in t and "EXPLAIN" not in t]
    functions = st.sampled_from(engine["functions"]) | st.sampled_from(DENIED_SAMPLE)
    sql = "SELECT 'x'"
    for _ in range(data.draw(st.integers(1, 3))):
        template = POSITIONS[data.draw(st.sampled_from(sorted(POSITIONS)))][0]
        inner = data.draw(functions)
        wrapped = template.format(f=inner)
        host = POSITIONS[data.draw(st.sampled_from(scalar))][0]
        sql = host.replace("{f}('x')", f"({wrapped}) = ({sql})") if "{f}('x')" in host else wrapped
    reads = Reads(inproc_store)
    try:
        checked = reads.guard.check(sql)
    except QueryRefused:
        return
    calls = resolved(inproc_store, checked.text)
    assert calls is None or not denied_calls(calls), (sql, calls)


class _NewerEngine:
    """A store whose engine has a function the shipped list does not know (a newer ClickHouse server)."""

    def __init__(self, store: ChdbBackend) -> None:
        self.store = store
        self.db = store.db

    def canonical(self, sql: str) -> str:
        return self.store.canonical(sql)

    def syntax_tree(self, sql: str) -> dict[str, Any] | None:
        return self.store.syntax_tree(sql)

    def engine_names(self) -> frozenset[str]:
        return self.store.engine_names() | {"readsecretfile"}


def test_a_function_only_the_running_engine_knows_is_refused_everywhere(inproc_store: ChdbBackend) -> None:
    guard = Guard(_NewerEngine(inproc_store), inproc_store.db)
    for sql in (
        f"SELECT * APPLY(readSecretFile) FROM {S}",
        "SELECT arrayMap(readSecretFile, ['x'])",
        "SELECT readSecretFile('x')",
    ):
        with pytest.raises(QueryRefused, match=r"(?i)readsecretfile"):
            guard.check(sql)
    guard.check(f"SELECT * APPLY(lower) FROM {S}")  # the allowed ones still pass
