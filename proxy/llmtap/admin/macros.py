"""Grafana variable and ClickHouse-plugin macro expansion, done the way the plugin does it.

Used by the built-in viewer (so dashboards/*.json render against the embedded store) and by
the tests that run every panel and alert query on chDB. Expansions follow
grafana/clickhouse-datasource ``pkg/macros/macros.go``; ``$__conditionalAll`` follows the
frontend (``1=1`` when the variable is "All" or empty).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..durations import parse_duration

ALL = "$__all"


@dataclass
class QueryContext:
    from_s: float
    to_s: float
    interval_s: int = 60
    variables: dict[str, list[str]] = field(default_factory=dict)  # [] or [ALL] means "All"


def _is_all(values: list[str] | None) -> bool:
    return not values or ALL in values


def _quote(v: str) -> str:
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def expand_variables(sql: str, ctx: QueryContext) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group("name") or m.group("name2")
        fmt = m.group("fmt") or ""
        if name.startswith("__"):
            return m.group(0)  # a macro, not a variable
        values = ctx.variables.get(name)
        if values is None:
            return m.group(0)
        if _is_all(values):
            values = []
        if fmt == "singlequote":
            return ",".join(_quote(v) for v in values) if values else "''"
        return ",".join(values)

    return re.sub(r"\$\{(?P<name>\w+)(?::(?P<fmt>\w+))?\}|\$(?P<name2>\w+)", sub, sql)


def _split_args(text: str) -> list[str]:
    args, depth, cur, quote = [], 0, [], ""
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    args.append("".join(cur).strip())
    return args


def _find_call(sql: str, name: str) -> tuple[int, int, list[str]] | None:
    i = sql.find(name + "(")
    if i < 0:
        return None
    j = i + len(name) + 1
    depth, quote = 1, ""
    k = j
    while k < len(sql) and depth:
        ch = sql[k]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        k += 1
    if depth:
        raise ValueError(f"unbalanced parentheses in {name}(")
    return i, k, _split_args(sql[j : k - 1])


def _duration_s(text: str) -> int:
    return int(parse_duration(text.strip().strip("'")))


def expand(sql: str, ctx: QueryContext) -> str:
    """Expand ``$__conditionalAll`` (needs the raw variables), then variables, then macros."""
    while (call := _find_call(sql, "$__conditionalAll")) is not None:
        i, k, args = call
        if len(args) != 2:
            raise ValueError("$__conditionalAll takes (condition, $variable)")
        var = args[1].strip().lstrip("$").strip("{}")
        sql = sql[:i] + ("1=1" if _is_all(ctx.variables.get(var)) else f"({args[0]})") + sql[k:]
    sql = expand_variables(sql, ctx)
    f, t = int(ctx.from_s), int(ctx.to_s)
    fm, tm = int(ctx.from_s * 1000), int(ctx.to_s * 1000)
    iv = max(int(ctx.interval_s), 1)
    funcs = {
        "$__timeFilter_ms": lambda a: (
            f"{a[0]} >= fromUnixTimestamp64Milli({fm}) AND {a[0]} <= fromUnixTimestamp64Milli({tm})"
        ),
        "$__timeFilter": lambda a: f"{a[0]} >= toDateTime({f}) AND {a[0]} <= toDateTime({t})",
        "$__timeInterval_ms": lambda a: f"toStartOfInterval(toDateTime64({a[0]}, 3), INTERVAL {iv * 1000} millisecond)",
        "$__timeInterval": lambda a: f"toStartOfInterval(toDateTime({a[0]}), INTERVAL {iv} second)",
        "$__timeGroup": lambda a: f"toStartOfInterval(toDateTime({a[0]}), INTERVAL {_duration_s(a[1])} second)",
        "$__timeFrom": lambda a: f"{a[0]} >= toDateTime({f})",
        "$__timeTo": lambda a: f"{a[0]} <= toDateTime({t})",
        "$__dateFilter": lambda a: f"{a[0]} >= toDate({f}) AND {a[0]} <= toDate({t})",
    }
    for name, fn in funcs.items():
        while (call := _find_call(sql, name)) is not None:
            i, k, args = call
            sql = sql[:i] + fn(args) + sql[k:]
    for name, value in (
        ("$__fromTime_ms", f"fromUnixTimestamp64Milli({fm})"),
        ("$__toTime_ms", f"fromUnixTimestamp64Milli({tm})"),
        ("$__fromTime", f"toDateTime({f})"),
        ("$__toTime", f"toDateTime({t})"),
        ("$__interval_s", str(iv)),
    ):
        sql = sql.replace(name, value)
    if "$__" in sql:
        raise ValueError(f"unsupported macro in: {sql[sql.index('$__') :][:40]}")
    return sql
