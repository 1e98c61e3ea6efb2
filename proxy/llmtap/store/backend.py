"""What the writer and the read paths need from a store."""

from __future__ import annotations

from typing import Protocol


class Backend(Protocol):
    """What the writer needs from a store."""

    def insert_rows(self, rows: list[bytes], token: str) -> None:
        """Insert ``otel_traces`` rows (RowBinary, see :mod:`.rowbinary`); ``token`` deduplicates a re-sent batch."""

    def query(self, sql: str, fmt: str = "JSONEachRow", params: dict[str, str] | None = None) -> bytes:
        """A read; ``params`` are bound as ClickHouse query parameters (``{name:Type}`` in the SQL)."""

    def close(self) -> None: ...
