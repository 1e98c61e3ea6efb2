"""What the writer and the read paths need from a store."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Backend(Protocol):
    """What the writer needs from a store, and its read side for admin queries."""

    db: str

    def insert_rows(self, rows: list[bytes], token: str) -> None:
        """Insert ``otel_traces`` rows (RowBinary, see :mod:`.rowbinary`); ``token`` deduplicates a re-sent batch."""

    def query(self, sql: str, fmt: str = "JSONEachRow", params: dict[str, str] | None = None) -> bytes:
        """llmtap's own SQL (schema, tools): never a query someone else wrote; ``params`` are bound as
        ClickHouse query parameters (``{name:Type}`` in the SQL)."""
        ...

    # The read side (see :mod:`.readonly`): the engine's parser, and checked queries run read-only,
    # bounded and cancellable, apart from the writer.
    def canonical(self, sql: str) -> str: ...

    def syntax_tree(self, sql: str) -> dict[str, Any] | None: ...

    def engine_names(self) -> frozenset[str]:
        """Lower-cased names of the engine's functions, from the engine the reads run on."""
        ...

    def read(
        self, sql: str, fmt: str = "JSONEachRow", params: Mapping[str, str] | None = None, tag: str = ""
    ) -> bytes: ...

    def cancel(self, tag: str = "") -> None: ...

    def close(self) -> None: ...
