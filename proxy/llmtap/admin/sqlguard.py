"""Read-only SQL, decided by the engine's own parser: one query over llmtap's tables, nothing else.

The query text never reaches the engine as SQL before it is checked. The engine parses it as
*data* (a bound query parameter): ``formatQuerySingleLine`` rejects anything that is not exactly
one statement and returns its canonical text; ``parseQueryToJSON`` of that canonical text gives
its syntax tree. The tree is walked against an allow-list: every node type and every field must
be known, so new syntax is refused until it is reviewed. Then every string of the tree is checked
again without regard to node types (:mod:`.sqlnames`): a word of a name that the engine could call
(one of its functions, by the shipped list and the running engine's own) must
be an allowed function, wherever it sits (an ``APPLY`` transformer carries its function as a plain
string field), and no word of a value may name a denied aggregate. What runs is the canonical text, so what
was checked is what executes (no comment, quoting or second-statement trick survives the round
trip). On top of that, the store runs admin queries with ``readonly = 1`` and resource limits
(:mod:`llmtap.store.readonly`), on a session of their own.

Allowed: ``SELECT`` (with ``WITH``, ``UNION``, joins, subqueries, window functions, ...) over
``llm_calls``, ``llm_calls_hourly``, ``llm_content``, ``otel_traces`` and ``llmtap_schema`` (by
name, or qualified with the store's database) and the query's own CTEs; functions from the
engine's list minus those that reach files, URLs, other servers, the process or its environment
(:mod:`.sqlfunctions`); ``EXPLAIN`` of such a query; ``SHOW TABLES``/``SHOW COLUMNS`` of the
store's database; ``DESCRIBE``/``SHOW CREATE``/``EXISTS`` of llmtap's tables. Refused: table
functions (all of them), other databases (``system`` included), ``SETTINGS``, ``INTO OUTFILE``,
``FORMAT`` (the format is an API parameter), and every other statement.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import LlmtapError
from .sqlfunctions import load as load_functions
from .sqlnames import NameRefused, check_tree, check_values
from .sqlverdicts import Refusal, VerdictCache

log = logging.getLogger("llmtap.admin")

ALLOWED_TABLES = frozenset({"llm_calls", "llm_calls_hourly", "llm_content", "otel_traces", "llmtap_schema"})
EXPLAIN_KINDS = frozenset(
    {
        "EXPLAIN",
        "EXPLAIN AST",
        "EXPLAIN SYNTAX",
        "EXPLAIN QUERY TREE",
        "EXPLAIN PLAN",
        "EXPLAIN PIPELINE",
        "EXPLAIN ESTIMATE",
    }
)
EXPLAIN_OPTIONS = frozenset(
    {"header", "description", "indexes", "actions", "json", "sorting", "keep_logical_steps", "graph", "compact",
     "optimize", "run_passes", "dump_passes", "passes", "dump_tree", "dump_ast", "oneline", "query_tree_passes",
     "projections", "distributed", "pretty"}
)  # fmt: skip
# Functions whose right-hand argument may name a table (``x IN some_table``).
IN_FUNCTIONS = frozenset(
    {"in", "notIn", "globalIn", "globalNotIn", "nullIn", "notNullIn", "globalNullIn", "globalNotNullIn", "inIgnoreSet",
     "notInIgnoreSet"}
)  # fmt: skip
MAX_QUERY_CHARS = 256 * 1024


class QueryRefused(LlmtapError, ValueError):
    """The query is not a read of llmtap's tables (or does not parse)."""


# Kept for callers of the earlier string guard.
ReadOnlyViolation = QueryRefused


def _store_away(e: BaseException) -> bool:
    """The parser's engine could not be reached (a server store that is down), as opposed to refusing the text."""
    return isinstance(e, (OSError, TimeoutError)) or type(e).__name__ == "OperationalError"  # clickhouse-connect


class Parser(Protocol):
    """The engine's parser, reached with the query as a bound parameter (never as SQL)."""

    def canonical(self, sql: str) -> str:
        """``formatQuerySingleLine(sql)``: one statement's canonical text; raises on anything else."""
        ...

    def syntax_tree(self, sql: str) -> dict[str, Any] | None:
        """``parseQueryToJSON(sql)``; None for a statement the engine cannot serialize (DESCRIBE, ...)."""
        ...

    def engine_names(self) -> frozenset[str]:
        """Lower-cased names of every function of the engine the query runs on."""
        ...


@dataclass(frozen=True)
class Checked:
    text: str  # the canonical statement to run
    kind: str  # "select", "explain", "show", "describe"
    params: frozenset[str] = frozenset()  # the query parameters ({name:Type}) it uses


# Node type → the fields it may carry (besides "type"). A field not listed refuses the query.
_ALIAS = {"alias", "prefer_alias_to_column_name"}
RULES: dict[str, frozenset[str]] = {
    k: frozenset(v)
    for k, v in {
        "SelectWithUnionQuery": {"union_mode", "list_of_modes", "list_of_selects", "is_outfile_append",
                                 "is_outfile_truncate", "is_into_outfile_with_stdout"},
        "SelectIntersectExceptQuery": {"final_operator", "children"},
        "SelectQuery": {"with", "select", "tables", "prewhere", "where", "group_by", "having", "window", "qualify",
                        "order_by", "limit_by_offset", "limit_by_length", "limit_by", "limit_offset", "limit_length",
                        "interpolate", "distinct", "group_by_with_totals", "group_by_with_rollup",
                        "group_by_with_cube", "group_by_with_constant_keys", "group_by_all",
                        "group_by_with_grouping_sets",
                        "order_by_all", "limit_with_ties", "recursive_with", "limit_by_all"},
        "ExpressionList": {"children", "separator"},
        "TablesInSelectQuery": {"children"},
        "TablesInSelectQueryElement": {"table_expression", "table_join", "array_join"},
        "TableExpression": {"database_and_table_name", "subquery", "final", "sample_size", "sample_offset"},
        "TableJoin": {"kind", "strictness", "locality", "on_expression", "using_expression_list"},
        "ArrayJoin": {"kind", "expression_list"},
        "TableIdentifier": {"name", "name_parts", *_ALIAS},
        "Identifier": {"name", "name_parts", *_ALIAS},
        "Literal": {"value", "custom_type", *_ALIAS},
        "QueryParameter": {"name", "param_type", *_ALIAS},
        "Function": {"name", "arguments", "parameters", "is_operator", "window_definition", "window_name",
                     "nulls_action", "is_lambda_function", "kind", "is_window_function",
                     "compute_after_window_functions",
                     "no_empty_args", *_ALIAS},
        "Asterisk": {"transformers", "expression"},
        "QualifiedAsterisk": {"qualifier", "transformers"},
        "ColumnsRegexpMatcher": {"pattern", "transformers", "expression"},
        "ColumnsListMatcher": {"column_list", "transformers", "expression"},
        "QualifiedColumnsRegexpMatcher": {"pattern", "qualifier", "transformers"},
        "QualifiedColumnsListMatcher": {"column_list", "qualifier", "transformers"},
        "ColumnsTransformerList": {"children"},
        "ColumnsApplyTransformer": {"func_name", "parameters", "lambda", "lambda_arg", "column_name_prefix"},
        "ColumnsExceptTransformer": {"children", "is_strict", "pattern"},
        "ColumnsReplaceTransformer": {"children", "is_strict"},
        "ColumnsReplaceTransformerReplacement": {"name", "expression", "children"},
        "OrderByElement": {"direction", "nulls_direction", "nulls_direction_was_explicitly_specified", "collation",
                           "with_fill", "fill_from", "fill_to", "fill_step", "fill_staleness", "expression"},
        "InterpolateElement": {"column", "expr"},
        "Subquery": {"children", "cte_name", *_ALIAS},
        "WithElement": {"name", "subquery", "aliases", "materialized"},
        "WindowDefinition": {"parent_window_name", "partition_by", "order_by", "frame_is_default", "frame_type",
                             "frame_begin_type", "frame_begin_offset", "frame_begin_preceding", "frame_end_type",
                             "frame_end_offset", "frame_end_preceding"},
        "WindowListElement": {"name", "definition"},
        "SampleRatio": {"numerator", "denominator"},
        "ExplainQuery": {"kind", "query", "settings", "is_outfile_append", "is_outfile_truncate",
                         "is_into_outfile_with_stdout"},
        "ShowTablesQuery": {"like", "not_like", "case_insensitive_like", "from", "is_outfile_append",
                            "is_outfile_truncate", "is_into_outfile_with_stdout", "limit_length", "full", "terse"},
        "ShowColumnsQuery": {"table", "database", "like", "not_like", "case_insensitive_like", "extended", "full",
                             "limit", "is_outfile_append", "is_outfile_truncate", "is_into_outfile_with_stdout"},
    }.items()
}  # fmt: skip


def _refuse(why: str) -> QueryRefused:
    return QueryRefused(why)


def _nodes(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if "type" in value:
            yield value
        else:  # a plain object (a literal's value): nothing to walk
            return
    elif isinstance(value, list):
        for v in value:
            yield from _nodes(v)


def _cte_names(node: Any) -> set[str]:
    names: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if n.get("type") == "WithElement" and isinstance(n.get("name"), str):
                names.add(n["name"])
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)
    return names


class _Walk:
    def __init__(self, db: str, ctes: set[str]) -> None:
        self.db = db
        self.ctes = ctes
        self.functions = load_functions()
        self.depth = 0
        self.params: set[str] = set()

    def table(self, node: dict[str, Any], what: str) -> None:
        parts = node.get("name_parts") or [node.get("name", "")]
        if not all(isinstance(p, str) for p in parts):
            raise _refuse(f"unreadable {what}")
        if len(parts) == 1 and (parts[0] in ALLOWED_TABLES or parts[0] in self.ctes):
            return
        if len(parts) == 2 and parts[0] == self.db and parts[1] in ALLOWED_TABLES:
            return
        raise _refuse(f"{what} {'.'.join(parts)!r} is not one of llmtap's tables ({', '.join(sorted(ALLOWED_TABLES))})")

    def node(self, node: dict[str, Any]) -> None:
        self.depth += 1
        if self.depth > 2000:
            raise _refuse("query too deeply nested")
        t = node.get("type")
        if t == "SetQuery":
            raise _refuse("SETTINGS is not allowed in an admin query (limits are set by llmtap)")
        if not isinstance(t, str) or t not in RULES:
            raise _refuse(f"{t} is not allowed in a read-only query")
        allowed = RULES[t]
        for key in node:
            if key != "type" and key not in allowed:
                raise _refuse(self._field_message(t, key))
        if t == "SelectWithUnionQuery":
            if (
                node.get("is_into_outfile_with_stdout")
                or node.get("is_outfile_append")
                or node.get("is_outfile_truncate")
            ):
                raise _refuse("INTO OUTFILE is not allowed")
        elif t == "TableIdentifier":
            self.table(node, "table")
        elif t == "QueryParameter":
            self.params.add(str(node.get("name")))
        elif t == "Function":
            self.function(node)
        elif t == "ExplainQuery":
            raise _refuse("EXPLAIN is only allowed as the whole statement")
        for key, value in node.items():
            if key in ("type", "name", "name_parts"):
                continue
            for child in _nodes(value):
                self.node(child)
        self.depth -= 1

    @staticmethod
    def _field_message(t: str, key: str) -> str:
        if key in ("out_file", "is_into_outfile_with_stdout"):
            return "INTO OUTFILE is not allowed"
        if key == "format_ast":
            return "FORMAT is not allowed in the query (pass the output format as a parameter)"
        if key in ("settings_ast", "settings"):
            return "SETTINGS is not allowed in an admin query (limits are set by llmtap)"
        if key == "table_function":
            return "table functions are not allowed (they reach files, URLs, other servers or programs)"
        if key == "compression":
            return "COMPRESSION is not allowed"
        return f"{t}.{key} is not allowed in a read-only query"

    def function(self, node: dict[str, Any]) -> None:
        name = node.get("name")
        if not isinstance(name, str) or not self.functions.is_allowed(name):
            why = self.functions.denied.get(str(name), "not a function llmtap allows")
            raise _refuse(f"function {name}() is not allowed: {why}")
        if name in IN_FUNCTIONS:
            args = node.get("arguments", {}).get("children", [])
            if len(args) == 2 and isinstance(args[1], dict) and args[1].get("type") == "Identifier":
                self.table(args[1], "IN table")


def _check_select(tree: dict[str, Any], db: str) -> frozenset[str]:
    if tree.get("type") != "SelectWithUnionQuery":
        raise _refuse(f"{tree.get('type')} is not a read-only query")
    walk = _Walk(db, _cte_names(tree))
    walk.node(tree)
    return frozenset(walk.params)


def _check_tree(tree: dict[str, Any], db: str) -> tuple[str, frozenset[str]]:
    t = tree.get("type")
    if t == "SelectWithUnionQuery":
        return "select", _check_select(tree, db)
    if t == "ExplainQuery":
        for key in tree:
            if key != "type" and key not in RULES[t]:
                raise _refuse(_Walk._field_message(t, key))
        if tree.get("kind") not in EXPLAIN_KINDS:
            raise _refuse(f"{tree.get('kind')} is not allowed")
        settings = tree.get("settings")
        if settings is not None:
            for change in settings.get("changes", []):
                if change.get("name") not in EXPLAIN_OPTIONS:
                    raise _refuse(f"EXPLAIN option {change.get('name')!r} is not allowed")
        query = tree.get("query")
        if not isinstance(query, dict):
            raise _refuse("EXPLAIN needs a query")
        return "explain", _check_select(query, db)
    if t in ("ShowTablesQuery", "ShowColumnsQuery"):
        for key in tree:
            if key != "type" and key not in RULES[t]:
                raise _refuse(_Walk._field_message(t, key))
        if t == "ShowTablesQuery":
            src = tree.get("from")
            if src is not None and not (isinstance(src, dict) and src.get("name") == db and "name_parts" not in src):
                raise _refuse(f"SHOW TABLES is only allowed for the store's database ({db})")
        else:
            if tree.get("database") not in (None, "", db) or tree.get("table") not in ALLOWED_TABLES:
                raise _refuse("SHOW COLUMNS is only allowed for llmtap's tables")
        return "show", frozenset()
    raise _refuse(f"{t} is not allowed: only SELECT, WITH, EXPLAIN, SHOW TABLES/COLUMNS and DESCRIBE")


def described_statements(db: str) -> list[str]:
    """The DESCRIBE / SHOW CREATE / EXISTS statements allowed (the engine has no tree for them)."""
    out = []
    for table in sorted(ALLOWED_TABLES):
        for name in (table, f"{db}.{table}"):
            out += [f"DESCRIBE TABLE {name}", f"SHOW CREATE TABLE {name}", f"EXISTS TABLE {name}"]
    return out


class Guard:
    """The admin query check for one store: its parser, its database, its last verdicts (:mod:`.sqlverdicts`)."""

    def __init__(self, parser: Parser, db: str) -> None:
        self.parser = parser
        self.db = db
        self._described: frozenset[str] | None = None
        self._engine: frozenset[str] | None = None
        self._verdicts: VerdictCache[Checked | Refusal] = VerdictCache()

    def check(self, sql: str) -> Checked:
        if not isinstance(sql, str) or not sql.strip():
            raise _refuse("empty query")
        if len(sql) > MAX_QUERY_CHARS:
            raise _refuse(f"query longer than {MAX_QUERY_CHARS} characters")
        hit = self._verdicts.get(sql)
        if isinstance(hit, Refusal):
            raise _refuse(hit.message)  # a new error each time: one raised in two threads would share a traceback
        if hit is not None:
            return hit
        text, tree = self._parse(sql)
        if tree is None:
            # Not remembered: the parser also answers None when the engine's answer never came (see _parse).
            if text in self.described():
                return Checked(text, "describe")
            raise _refuse(
                "only SELECT, WITH, EXPLAIN, SHOW TABLES/COLUMNS and DESCRIBE/SHOW CREATE/EXISTS of llmtap's tables"
            )
        try:
            kind, params = _check_tree(tree, self.db)
            check_tree(tree, load_functions(), self.engine())
        except (QueryRefused, NameRefused) as e:
            self._verdicts.put(sql, Refusal(str(e)), len(str(e)))
            raise _refuse(str(e)) from None
        checked = Checked(text, kind, params)
        self._verdicts.put(sql, checked, len(text) + sum(map(len, params)))
        return checked

    def _parse(self, sql: str) -> tuple[str, dict[str, Any] | None]:
        """The canonical text and its tree. A refusal here is not remembered: the store's parser fails alike when
        its answer was lost (a session's leftover output, twice) and when the text does not parse."""
        try:
            text = self.parser.canonical(sql)
        except QueryRefused:
            raise
        except Exception as e:
            if _store_away(e):  # the engine did not answer: not a verdict on the query
                raise
            raise _refuse(f"not a single valid statement: {_engine_message(e)}") from None
        try:
            return text, self.parser.syntax_tree(text)
        except Exception as e:
            if _store_away(e):
                raise
            raise _refuse(f"cannot parse the query: {_engine_message(e)}") from None

    def check_values(self, values: Iterable[str]) -> None:
        """Bound parameter values are literals to the engine: none may name a denied aggregate."""
        try:
            check_values(values, load_functions())
        except NameRefused as e:
            raise _refuse(f"parameter value: {e}") from None

    def engine(self) -> frozenset[str]:
        """The running engine's callable names (a server newer than the shipped list has more), once."""
        if self._engine is None:
            try:
                self._engine = self.parser.engine_names()
            except Exception as e:
                if _store_away(e):
                    raise
                log.warning("admin: the engine's function list is unreadable (%s); using llmtap's own", e)
                self._engine = frozenset()
        return self._engine

    def described(self) -> frozenset[str]:
        if self._described is None:
            self._described = frozenset(self.parser.canonical(s) for s in described_statements(self.db))
        return self._described


def _engine_message(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    cut = msg.find(": In scope SELECT")
    return (msg[:cut] if cut > 0 else msg)[:300]
