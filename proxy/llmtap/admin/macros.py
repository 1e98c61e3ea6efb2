"""Grafana variable and ClickHouse-plugin macro expansion, for the built-in viewer and the dashboard tests.

Expansions follow grafana/clickhouse-datasource ``pkg/macros/macros.go``; ``$__conditionalAll``
follows the frontend (``1=1`` when the variable is "All" or empty). Two differences from Grafana,
because here the variable values come from whoever sends the request:

- **Values never enter the SQL text.** ``${v:singlequote}`` and ``$v`` become ClickHouse query
  parameters (``{p0:String}, {p1:String}``) returned beside the text; a variable inside a string
  literal or a comment of the panel SQL is refused (it could not be bound).
- **The time range is bound too** (``{__from:Int64}``, ``{__to:Int64}``, and ``_ms``): a panel's text is the
  same at every range and every refresh, so the SQL guard checks it once (its verdict cache) and the engine
  parses only the read. ``expand`` gives the plugin's literal text.
- **One pass, linear, bounded.** The text is scanned once, left to right; macro arguments come from
  the dashboard file (never from a value) and are expanded once; the output is capped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..durations import parse_duration
from ..errors import LlmtapError

ALL = "$__all"
MAX_SQL_CHARS = 256 * 1024
MAX_VALUES = 200  # values of one variable
MAX_VALUE_CHARS = 4096
MAX_DEPTH = 8  # nested $__conditionalAll


class MacroError(LlmtapError, ValueError):
    pass


@dataclass
class QueryContext:
    from_s: float
    to_s: float
    interval_s: int = 60
    variables: dict[str, list[str]] = field(default_factory=dict)  # [] or [ALL] means "All"


@dataclass
class Expanded:
    sql: str
    params: dict[str, str] = field(default_factory=dict)


def _is_all(values: list[str] | None) -> bool:
    return not values or ALL in values


def _skip_quoted(sql: str, i: int) -> int:
    """Index after the quoted literal/identifier starting at ``sql[i]``."""
    q = sql[i]
    j = i + 1
    n = len(sql)
    while j < n:
        c = sql[j]
        if c == "\\":
            j += 2
            continue
        if c == q:
            if j + 1 < n and sql[j + 1] == q:  # '' inside a literal
                j += 2
                continue
            return j + 1
        j += 1
    raise MacroError("unterminated quote in the panel SQL")


def _skip_comment(sql: str, i: int) -> int:
    if sql.startswith("--", i):
        end = sql.find("\n", i)
        return len(sql) if end < 0 else end + 1
    end = sql.find("*/", i + 2)
    if end < 0:
        raise MacroError("unterminated comment in the panel SQL")
    return end + 2


def _call_args(sql: str, i: int) -> tuple[list[str], int]:
    """``sql[i]`` is the ``(`` of a macro call: its top-level arguments and the index after ``)``."""
    depth, j, start, args = 1, i + 1, i + 1, []
    n = len(sql)
    while j < n:
        c = sql[j]
        if c in "'\"`":
            j = _skip_quoted(sql, j)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append(sql[start:j].strip())
                return args, j + 1
        elif c == "," and depth == 1:
            args.append(sql[start:j].strip())
            start = j + 1
        j += 1
    raise MacroError("unbalanced parentheses in a macro call")


def _name_at(sql: str, i: int) -> tuple[str, str, int] | None:
    """A variable reference at ``sql[i] == '$'``: (name, format, end) for ``$name`` or ``${name[:fmt]}``."""
    n = len(sql)
    if i + 1 < n and sql[i + 1] == "{":
        end = sql.find("}", i + 2)
        if end < 0:
            return None
        name, _, fmt = sql[i + 2 : end].partition(":")
        return (name, fmt, end + 1) if name.replace("_", "a").isalnum() else None
    j = i + 1
    while j < n and (sql[j].isalnum() or sql[j] == "_"):
        j += 1
    return (sql[i + 1 : j], "", j) if j > i + 1 else None


class _Expander:
    def __init__(self, ctx: QueryContext) -> None:
        self.ctx = ctx
        self.params: dict[str, str] = {}
        self.times = {"__from": int(ctx.from_s), "__to": int(ctx.to_s)}
        self.times |= {"__from_ms": int(ctx.from_s * 1000), "__to_ms": int(ctx.to_s * 1000)}
        t = self.time
        iv = max(int(ctx.interval_s), 1)
        self.funcs: dict[str, Callable[[list[str]], str]] = {
            "__timeFilter_ms": lambda a: (
                f"{a[0]} >= fromUnixTimestamp64Milli({t('__from_ms')})"
                f" AND {a[0]} <= fromUnixTimestamp64Milli({t('__to_ms')})"
            ),
            "__timeFilter": lambda a: f"{a[0]} >= toDateTime({t('__from')}) AND {a[0]} <= toDateTime({t('__to')})",
            "__timeInterval_ms": lambda a: (
                f"toStartOfInterval(toDateTime64({a[0]}, 3), INTERVAL {iv * 1000} millisecond)"
            ),
            "__timeInterval": lambda a: f"toStartOfInterval(toDateTime({a[0]}), INTERVAL {iv} second)",
            "__timeGroup": lambda a: f"toStartOfInterval(toDateTime({a[0]}), INTERVAL {_duration_s(a[1])} second)",
            "__timeFrom": lambda a: f"{a[0]} >= toDateTime({t('__from')})",
            "__timeTo": lambda a: f"{a[0]} <= toDateTime({t('__to')})",
            "__dateFilter": lambda a: f"{a[0]} >= toDate({t('__from')}) AND {a[0]} <= toDate({t('__to')})",
        }
        self.values: dict[str, Callable[[], str]] = {
            "__fromTime_ms": lambda: f"fromUnixTimestamp64Milli({t('__from_ms')})",
            "__toTime_ms": lambda: f"fromUnixTimestamp64Milli({t('__to_ms')})",
            "__fromTime": lambda: f"toDateTime({t('__from')})",
            "__toTime": lambda: f"toDateTime({t('__to')})",
            "__interval_s": lambda: str(iv),
        }

    def time(self, name: str) -> str:
        """A bound time's placeholder; its value joins the query's parameters only when the text uses it (a
        parameter the text does not use is refused by the read path)."""
        self.params[name] = str(self.times[name])
        return f"{{{name}:Int64}}"

    def bind(self, values: list[str]) -> str:
        names = []
        for v in values:
            name = f"p{sum(not k.startswith('__') for k in self.params)}"
            self.params[name] = v
            names.append(f"{{{name}:String}}")
        return ", ".join(names)

    def variable(self, name: str, fmt: str) -> str | None:
        values = self.ctx.variables.get(name)
        if values is None:
            return None
        if len(values) > MAX_VALUES or any(len(v) > MAX_VALUE_CHARS for v in values):
            raise MacroError(f"too many or too long values for ${name}")
        if fmt not in ("", "singlequote"):
            raise MacroError(f"unsupported variable format {fmt!r}")
        chosen = [] if _is_all(values) else values
        return self.bind(chosen) if chosen else "''"

    def expand(self, sql: str, depth: int = 0) -> str:
        if depth > MAX_DEPTH:
            raise MacroError("macros nested too deeply")
        out: list[str] = []
        size, i, n = 0, 0, len(sql)
        while i < n:
            c = sql[i]
            if c in "'\"`":
                j = _skip_quoted(sql, i)
                if "$" in sql[i:j] and any(
                    (ref := _name_at(sql, k)) is not None and ref[0] in self.ctx.variables
                    for k in range(i, j)
                    if sql[k] == "$"
                ):
                    raise MacroError("a variable inside a string literal cannot be bound: use ${name:singlequote}")
                piece, i = sql[i:j], j
            elif sql.startswith(("--", "/*"), i):
                j = _skip_comment(sql, i)
                piece, i = sql[i:j], j
            elif c == "$":
                piece, i = self.dollar(sql, i, depth)
            else:
                j = i + 1
                while j < n and sql[j] not in "'\"`$-/":
                    j += 1
                piece, i = sql[i:j], j
            size += len(piece)
            if size > MAX_SQL_CHARS:
                raise MacroError("the expanded query is too long")
            out.append(piece)
        return "".join(out)

    def dollar(self, sql: str, i: int, depth: int) -> tuple[str, int]:
        if sql.startswith("$__conditionalAll(", i):
            args, end = _call_args(sql, i + len("$__conditionalAll"))
            if len(args) != 2:
                raise MacroError("$__conditionalAll takes (condition, $variable)")
            var = args[1].strip().lstrip("$").strip("{}")
            if _is_all(self.ctx.variables.get(var)):
                return "1=1", end
            return f"({self.expand(args[0], depth + 1)})", end
        for name, fn in self.funcs.items():
            if sql.startswith("$" + name + "(", i):
                args, end = _call_args(sql, i + 1 + len(name))
                return fn([self.expand(a, depth + 1) for a in args]), end
        for name, value in self.values.items():
            if sql.startswith("$" + name, i):
                return value(), i + 1 + len(name)
        ref = _name_at(sql, i)
        if ref is not None and ref[0].startswith("__"):
            raise MacroError(f"unsupported macro in: {sql[i : i + 40]}")
        if ref is not None:
            bound = self.variable(ref[0], ref[1])
            if bound is not None:
                return bound, ref[2]
            return sql[i : ref[2]], ref[2]
        return "$", i + 1


def _duration_s(text: str) -> int:
    return int(parse_duration(text.strip().strip("'")))


def expand_query(sql: str, ctx: QueryContext) -> Expanded:
    """The panel SQL with macros expanded and variables bound as query parameters."""
    e = _Expander(ctx)
    return Expanded(e.expand(sql), e.params)


def expand(sql: str, ctx: QueryContext) -> str:
    """Macros and variables expanded into one text (values quoted): for tests and tools over trusted values."""
    x = expand_query(sql, ctx)
    for name, value in sorted(x.params.items(), key=lambda kv: -len(kv[0])):
        x.sql = x.sql.replace(f"{{{name}:Int64}}", value)  # a bound time: its number, as the plugin writes it
        x.sql = x.sql.replace(f"{{{name}:String}}", "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'")
    return x.sql
