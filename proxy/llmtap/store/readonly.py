"""The read side of a store, for queries llmtap did not write itself (the admin API, the viewer, ``llmtap sql``).

Every such query runs with :class:`QueryLimits` as engine settings (``readonly = 1``, a time, memory and
result bound), tagged so it can be cancelled, and never on the writer's session or connection: a
long read cannot hold up ingestion or shutdown. A cancelled tag is remembered (:class:`Cancellations`):
a read of that tag still waiting for a session, or not started yet, never runs. Before it runs, the admin's guard
(:mod:`llmtap.admin.sqlguard`) asks the engine to parse it; :class:`EngineParser` is that parser,
over any ``run(sql, params) -> JSONEachRow bytes`` of an engine that has ``parseQueryToJSON``.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import LlmtapError

# Each parser query echoes a nonce: an answer is taken only from the line that carries it (chDB has handed the
# output a failed query had already written to the next query of a session: see store/embedded.FreshSession).
CANONICAL_SQL = "SELECT {n:String} AS n, formatQuerySingleLine({q:String}) AS t"
TREE_SQL = "SELECT {n:String} AS n, parseQueryToJSON({q:String}) AS j"
NAMES_SQL = "SELECT {n:String} AS n, lower(name) AS f FROM system.functions"
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


class QueryCancelled(LlmtapError, RuntimeError):
    """The query's client went away before it ran: it was not started."""


class Cancellations:
    """Tags of cancelled admin queries, kept ``keep_s`` seconds (at most ``cap``): a read of one never starts."""

    def __init__(self, keep_s: float = 600.0, cap: int = 10_000) -> None:
        self.keep_s, self.cap = keep_s, cap
        self._tags: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def cancel(self, tag: str) -> None:
        if not tag:
            return
        with self._lock:
            now = time.monotonic()
            self._tags[tag] = now
            self._tags.move_to_end(tag)
            while self._tags and (len(self._tags) > self.cap or next(iter(self._tags.values())) < now - self.keep_s):
                self._tags.popitem(last=False)

    def cancelled(self, tag: str) -> bool:
        with self._lock:
            return bool(tag) and tag in self._tags

    def check(self, tag: str) -> None:
        if self.cancelled(tag):
            raise QueryCancelled("query cancelled: its client went away before it ran")


def param_value(value: str) -> str:
    """A query parameter's value as the engine reads it (the escaped text format: ``\\``, ``\n``, ...)."""
    return (
        value.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r").replace("\0", "\\0")
    )


def param_values(params: Mapping[str, str] | None) -> dict[str, str]:
    return {k: param_value(v) for k, v in (params or {}).items()}


_DECODER = json.JSONDecoder()


class EngineParser:
    """The engine's parser, with the query as a bound parameter: nothing of it is ever executed."""

    def __init__(self, run: Callable[[str, Mapping[str, str]], bytes]) -> None:
        self._run = run

    def _answer(self, sql: str, q: str) -> dict[str, Any] | None:
        """The one row the parser query answered for ``q``: the line carrying this call's nonce. A line of
        anything else (another query's output left on the session) is passed over; with no such line the query
        is asked once more (the engine's session is fresh after a failure), then given up."""
        for _ in range(2):
            nonce = secrets.token_hex(8)
            text = self._run(sql, {"n": nonce, "q": q}).decode("utf-8", "replace")
            at = text.rfind('{"n"', 0, max(text.find(nonce), 0))  # its row, even glued to a row left cut
            if at >= 0:
                try:
                    row, _ = _DECODER.raw_decode(text, at)
                except ValueError:
                    continue
                if isinstance(row, dict) and row.get("n") == nonce:
                    return row
        return None

    def canonical(self, sql: str) -> str:
        row = self._answer(CANONICAL_SQL, sql)
        value = row.get("t") if row is not None else None
        if not isinstance(value, str) or not value:
            raise ValueError("the engine returned no statement")
        return value

    def syntax_tree(self, sql: str) -> dict[str, Any] | None:
        try:
            row = self._answer(TREE_SQL, sql)
        except Exception as e:
            if NO_TREE in str(e):
                return None
            raise
        value = row.get("j") if row is not None else None
        tree = json.loads(value) if isinstance(value, str) else None
        return tree if isinstance(tree, dict) else None

    def engine_names(self) -> frozenset[str]:
        """Lower-cased names of the engine's functions (its own list, not llmtap's shipped one): the rows that
        carry this call's nonce, so another query's output left on the session is never taken for a name. With
        none, asked once more; then an error (the guard falls back to llmtap's shipped list)."""
        for _ in range(2):
            nonce = secrets.token_hex(8)
            text = self._run(NAMES_SQL, {"n": nonce}).decode("utf-8", "replace")
            names = set()
            for m in re.finditer('{"n":"' + nonce + '"', text):  # a row, even glued to a row left cut
                try:
                    row, _ = _DECODER.raw_decode(text, m.start())
                except ValueError:
                    continue
                if isinstance(row, dict) and isinstance(row.get("f"), str):
                    names.add(row["f"])
            if names:
                return frozenset(names)
        raise ValueError("the engine listed no functions")


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
            try:
                res = self._session.query(sql, "JSONEachRow", params=param_values(params))
            except Exception:  # chDB may hand a failed query's output to the next one: a new session
                self._session.close()
                self._session = None
                raise
            return bytes(res.bytes()) if res is not None else b""
