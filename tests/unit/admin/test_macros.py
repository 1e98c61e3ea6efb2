"""The macro expander: what each ClickHouse-plugin macro becomes, variables bound (never spliced), and the
panel SQL it refuses. Expected texts are the plugin's (grafana/clickhouse-datasource pkg/macros/macros.go)."""

from __future__ import annotations

import pytest

from llmtap.admin.macros import (
    ALL,
    MAX_DEPTH,
    MAX_SQL_CHARS,
    MAX_VALUES,
    MacroError,
    QueryContext,
    expand,
    expand_query,
)

FROM, TO = 1_700_000_000.25, 1_700_003_600.75  # fractional: the _ms forms keep the milliseconds
CTX = QueryContext(FROM, TO, 600)


@pytest.mark.parametrize(
    ("sql", "text"),
    [
        ("$__timeFilter(ts)", "ts >= toDateTime(1700000000) AND ts <= toDateTime(1700003600)"),
        (
            "$__timeFilter_ms(ts)",
            "ts >= fromUnixTimestamp64Milli(1700000000250) AND ts <= fromUnixTimestamp64Milli(1700003600750)",
        ),
        ("$__timeInterval(ts)", "toStartOfInterval(toDateTime(ts), INTERVAL 600 second)"),
        ("$__timeInterval_ms(ts)", "toStartOfInterval(toDateTime64(ts, 3), INTERVAL 600000 millisecond)"),
        ("$__timeGroup(ts, '5m')", "toStartOfInterval(toDateTime(ts), INTERVAL 300 second)"),
        ("$__timeFrom(ts)", "ts >= toDateTime(1700000000)"),
        ("$__timeTo(ts)", "ts <= toDateTime(1700003600)"),
        ("$__dateFilter(d)", "d >= toDate(1700000000) AND d <= toDate(1700003600)"),
        ("$__fromTime", "toDateTime(1700000000)"),
        ("$__toTime", "toDateTime(1700003600)"),
        ("$__fromTime_ms", "fromUnixTimestamp64Milli(1700000000250)"),
        ("$__toTime_ms", "fromUnixTimestamp64Milli(1700003600750)"),
        ("count() / $__interval_s", "count() / 600"),
        (
            "$__timeFilter(toDate($__fromTime))",  # a macro's arguments are expanded too
            "toDate(toDateTime(1700000000)) >= toDateTime(1700000000) AND toDate(toDateTime(1700000000)) <= "
            "toDateTime(1700003600)",
        ),
        ("SELECT '$5' AS price, 2 - 1 AS one", "SELECT '$5' AS price, 2 - 1 AS one"),  # not a variable: left alone
        ("SELECT 1 -- $__timeFilter(x)\n", "SELECT 1 -- $__timeFilter(x)\n"),  # comments are copied
        ("SELECT 'it''s' /* $x */", "SELECT 'it''s' /* $x */"),
        ("SELECT $ 1", "SELECT $ 1"),
    ],
)
def test_each_macro_expands_to_the_plugins_text(sql: str, text: str) -> None:
    assert expand(sql, CTX) == text
    x = expand_query(sql, CTX)  # the read path's form: the times bound, nothing else
    assert set(x.params) <= {"__from", "__to", "__from_ms", "__to_ms"}
    assert all(f"{{{name}:Int64}}" in x.sql for name in x.params)


def test_the_time_range_is_bound_so_a_panel_is_one_text_at_every_range() -> None:
    """A refresh moves the range: the text stays the same (the guard checks it once), the values move."""
    sql = "SELECT count() FROM llm_calls WHERE $__timeFilter(timestamp) AND x > $__fromTime_ms AND $__timeTo(t)"
    a, b = expand_query(sql, CTX), expand_query(sql, QueryContext(FROM + 30, TO + 30, 600))
    assert a.sql == b.sql
    assert a.sql == (
        "SELECT count() FROM llm_calls WHERE timestamp >= toDateTime({__from:Int64}) AND timestamp <= "
        "toDateTime({__to:Int64}) AND x > fromUnixTimestamp64Milli({__from_ms:Int64}) AND t <= toDateTime({__to:Int64})"
    )
    assert a.params == {"__from": "1700000000", "__to": "1700003600", "__from_ms": "1700000000250"}
    assert b.params["__from"] == "1700000030"
    assert expand_query("SELECT 1", CTX).params == {}  # a parameter the text does not use would be refused


def test_an_interval_below_a_second_is_one_second() -> None:
    assert expand_query("$__interval_s", QueryContext(FROM, TO, 0)).sql == "1"


def test_values_are_bound_as_parameters_never_spliced() -> None:
    hostile = "x') OR 1=1 --"
    ctx = QueryContext(FROM, TO, 60, {"provider": ["openai", hostile], "model": ["gpt-4o"]})
    x = expand_query("WHERE provider IN (${provider:singlequote}) AND request_model = $model", ctx)
    assert x.sql == "WHERE provider IN ({p0:String}, {p1:String}) AND request_model = {p2:String}"
    assert x.params == {"p0": "openai", "p1": hostile, "p2": "gpt-4o"}
    assert hostile not in x.sql


@pytest.mark.parametrize("values", [[], [ALL], ["openai", ALL]])
def test_all_or_nothing_selected_binds_nothing(values: list[str]) -> None:
    ctx = QueryContext(FROM, TO, 60, {"provider": values})
    x = expand_query("provider IN (${provider:singlequote})", ctx)
    assert (x.sql, x.params) == ("provider IN ('')", {})
    cond = expand_query("WHERE $__conditionalAll(provider IN (${provider:singlequote}), $provider)", ctx)
    assert (cond.sql, cond.params) == ("WHERE 1=1", {})


def test_conditional_all_keeps_its_condition_when_values_are_chosen() -> None:
    ctx = QueryContext(FROM, TO, 60, {"feature": ["summarize"]})
    x = expand_query("WHERE $__conditionalAll(feature IN (${feature:singlequote}), ${feature})", ctx)
    assert (x.sql, x.params) == ("WHERE (feature IN ({p0:String}))", {"p0": "summarize"})


def test_a_variable_the_context_does_not_have_is_left_as_written() -> None:
    assert expand_query("SELECT ${other} + $other", CTX).sql == "SELECT ${other} + $other"


def test_expand_quotes_the_values_for_trusted_callers() -> None:
    ctx = QueryContext(FROM, TO, 60, {"user": ["o'brien\\x"]})
    assert expand("user_id = ${user:singlequote}", ctx) == "user_id = 'o\\'brien\\\\x'"


@pytest.mark.parametrize(
    ("sql", "variables", "message"),
    [
        ("WHERE user_id = '$user'", {"user": ["u"]}, "inside a string literal"),
        ("SELECT 'open", {}, "unterminated quote"),
        ("SELECT 1 /* open", {}, "unterminated comment"),
        ("$__timeFilter(ts", {}, "unbalanced parentheses"),
        ("$__conditionalAll(a = 1)", {}, "takes (condition, $variable)"),
        ("$__timeSeries(ts)", {}, "unsupported macro"),
        ("${user:csv}", {"user": ["u"]}, "unsupported variable format"),
        ("$user", {"user": ["u"] * (MAX_VALUES + 1)}, "too many or too long"),
        ("$user", {"user": ["u" * 5000]}, "too many or too long"),
    ],
)
def test_what_cannot_be_expanded_safely_is_refused(sql: str, variables: dict[str, list[str]], message: str) -> None:
    with pytest.raises(MacroError, match=message.replace("$", r"\$").replace("(", r"\(").replace(")", r"\)")):
        expand_query(sql, QueryContext(FROM, TO, 60, variables))


def test_nesting_and_size_are_bounded() -> None:
    ctx = QueryContext(FROM, TO, 60, {"v": ["x"]})
    nested = "x = 1"
    for _ in range(MAX_DEPTH + 2):
        nested = f"$__conditionalAll({nested}, $v)"
    with pytest.raises(MacroError, match="nested too deeply"):
        expand_query(nested, ctx)
    ok = "x = 1"
    for _ in range(MAX_DEPTH):
        ok = f"$__conditionalAll({ok}, $v)"
    assert expand_query(ok, ctx).sql == "(" * MAX_DEPTH + "x = 1" + ")" * MAX_DEPTH
    with pytest.raises(MacroError, match="too long"):
        expand_query("$__timeFilter(t) " * (MAX_SQL_CHARS // 40), ctx)
