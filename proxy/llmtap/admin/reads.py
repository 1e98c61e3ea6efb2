"""Every query llmtap runs for someone else: guarded, bound, limited, cancellable.

One path for the admin API (``POST /api/sql``), the viewer's panels and variables, and ``llmtap
sql``/``report``/``check-cost`` when they open the store themselves: :class:`Reads` checks the
query with the engine-backed guard (:mod:`.sqlguard`), binds values as ClickHouse query parameters
(``{name:Type}``, never spliced into the text), and runs the canonical statement on the store's
read side (``readonly = 1``, time/memory/result limits, its own session or connection), tagged so
that :meth:`Reads.cancel` can stop it when its client goes away.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .sqlguard import Guard, QueryRefused

FORMAT_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
PARAM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_PARAMS = 256
MAX_PARAM_CHARS = 64 * 1024


class ReadStore(Protocol):
    """What the admin needs from a store's read side (both backends implement it)."""

    db: str

    def canonical(self, sql: str) -> str: ...

    def syntax_tree(self, sql: str) -> dict[str, Any] | None: ...

    def engine_names(self) -> frozenset[str]: ...

    def read(
        self, sql: str, fmt: str = "JSONEachRow", params: Mapping[str, str] | None = None, tag: str = ""
    ) -> bytes: ...

    def cancel(self, tag: str = "") -> None: ...


def new_tag() -> str:
    return secrets.token_hex(8)


class Reads:
    def __init__(self, store: ReadStore, before: Callable[[], None] | None = None) -> None:
        self.store = store
        self.guard = Guard(store, store.db)
        self._before = before  # e.g. flush the writer: reads see every finished call

    def run(self, sql: str, fmt: str = "JSONEachRow", params: Mapping[str, Any] | None = None, tag: str = "") -> bytes:
        """Raises :class:`QueryRefused` (not a read of llmtap's tables, bad format or parameters) or the
        store's error (the query failed, or hit a limit)."""
        if not isinstance(fmt, str) or not FORMAT_RE.match(fmt):
            raise QueryRefused(f"invalid output format {fmt!r}")
        bound = check_params(params)
        checked = self.guard.check(sql)
        self.guard.check_values(bound.values())
        unused = set(bound) - checked.params
        if unused:
            raise QueryRefused(f"parameter {sorted(unused)[0]!r} does not appear in the query as {{name:Type}}")
        if self._before is not None:
            self._before()
        return self.store.read(checked.text, fmt, bound, tag or new_tag())

    def cancel(self, tag: str) -> None:
        try:
            self.store.cancel(tag)
        except Exception:
            pass


def check_params(params: Mapping[str, Any] | None) -> dict[str, str]:
    if params is None:
        return {}
    if not isinstance(params, Mapping) or len(params) > MAX_PARAMS:
        raise QueryRefused("params must be an object of at most 256 names")
    out: dict[str, str] = {}
    for k, v in params.items():
        if not isinstance(k, str) or not PARAM_RE.match(k):
            raise QueryRefused(f"invalid parameter name {k!r}")
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise QueryRefused(f"parameter {k!r} must be a string or a number")
        s = str(v)
        if len(s) > MAX_PARAM_CHARS:
            raise QueryRefused(f"parameter {k!r} is too long")
        out[k] = s
    return out
