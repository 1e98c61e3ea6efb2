"""The read side of a store, for queries llmtap did not write itself (the admin API, the viewer, ``llmtap sql``).

Every such query runs with :class:`QueryLimits` as engine settings (``readonly = 1``, a time, memory and
result bound), tagged so it can be cancelled, and never on the writer's session or connection: a
long read cannot hold up ingestion or shutdown. Before it runs, the admin's guard
(:mod:`llmtap.admin.sqlguard`) asks the engine to parse it; :class:`EngineParser` is that parser,
over any ``run(sql, params) -> JSONEachRow bytes`` of an engine that has ``parseQueryToJSON``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

CANONICAL_SQL = "SELECT formatQuerySingleLine({q:String}) AS t"
TREE_SQL = "SELECT parseQueryToJSON({q:String}) AS j"
NO_TREE = "does not support JSON serialization"


@dataclass(frozen=True)
class QueryLimits:
    """Engine limits on one admin query (``LLMTAP_ADMIN_QUERY_*`` override the defaults: :mod:`llmtap.config`)."""

    max_execution_time: int = 30  # seconds
    max_memory_usage: int = 1 << 30  # bytes
    max_result_rows: int = 1_000_000
    max_result_bytes: int = 256 << 20

    def settings(self) -> dict[str, Any]:
        return {
            "max_execution_time": self.max_execution_time,
            "max_memory_usage": self.max_memory_usage,
            "max_result_rows": self.max_result_rows,
            "max_result_bytes": self.max_result_bytes,
            "result_overflow_mode": "throw",
            "max_query_size": 1 << 20,
        }


TAG_PREFIX = "/* llmtap-admin:"


def tagged(sql: str, tag: str) -> str:
    """The statement as the engine sees it: a leading comment names the query for cancellation."""
    if not tag.isalnum():
        raise ValueError("a query tag is alphanumeric")
    return f"{TAG_PREFIX}{tag} */ {sql}"


def param_value(value: str) -> str:
    """A query parameter's value as the engine reads it (the escaped text format: ``\\``, ``\n``, ...)."""
    return (
        value.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r").replace("\0", "\\0")
    )


def param_values(params: Mapping[str, str] | None) -> dict[str, str]:
    return {k: param_value(v) for k, v in (params or {}).items()}


class EngineParser:
    """The engine's parser, with the query as a bound parameter: nothing of it is ever executed."""

    def __init__(self, run: Callable[[str, Mapping[str, str]], bytes]) -> None:
        self._run = run

    def canonical(self, sql: str) -> str:
        raw = self._run(CANONICAL_SQL, {"q": sql})
        value = json.loads(raw.strip().splitlines()[0])["t"] if raw.strip() else ""
        if not isinstance(value, str) or not value:
            raise ValueError("the engine returned no statement")
        return value

    def syntax_tree(self, sql: str) -> dict[str, Any] | None:
        try:
            raw = self._run(TREE_SQL, {"q": sql})
        except Exception as e:
            if NO_TREE in str(e):
                return None
            raise
        line = raw.strip().splitlines()[0] if raw.strip() else b"{}"
        value = json.loads(line).get("j")
        tree = json.loads(value) if isinstance(value, str) else None
        return tree if isinstance(tree, dict) else None


class LocalParser(EngineParser):
    """The embedded engine's parser (an in-memory chDB session), for a server without ``parseQueryToJSON``.

    Only for processes that have no embedded store of their own (chDB opens one path per process).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None
        super().__init__(self._query)

    def _query(self, sql: str, params: Mapping[str, str]) -> bytes:
        with self._lock:
            if self._session is None:
                from chdb import session

                self._session = session.Session(":memory:")
                self._session.query("SET readonly = 1")
            res = self._session.query(sql, "JSONEachRow", params=param_values(params))
            return bytes(res.bytes()) if res is not None else b""
