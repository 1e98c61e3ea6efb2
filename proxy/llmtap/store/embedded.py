"""The embedded store: the ClickHouse engine in-process through chDB."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from . import rowbinary
from .schema import DEFAULT_DB, apply_schema, retention_statement

# Engine caches sized for a sidecar, not a database server: ClickHouse's defaults let the mark
# and index caches grow to 5 GiB each and the compiled-expression and query-condition caches to
# 128 and 100 MiB. Server settings travel as start-up arguments in chDB's connection string.
ENGINE_SETTINGS = {
    "mark_cache_size": 64 << 20,
    "index_mark_cache_size": 16 << 20,
    "primary_index_cache_size": 16 << 20,
    "compiled_expression_cache_size": 16 << 20,
    "query_condition_cache_size": 16 << 20,
}


class ChdbBackend:
    """One chDB session per process, serialized by a lock (chDB is not re-entrant)."""

    def __init__(self, path: Path, db: str = DEFAULT_DB, retention: dict[str, int] | None = None) -> None:
        from chdb import session

        path.mkdir(parents=True, exist_ok=True)
        self.db = db
        self.path = path
        self.retention = retention or {}
        self._lock = threading.Lock()
        settings = "&".join(f"{k}={v}" for k, v in ENGINE_SETTINGS.items())
        self._session = session.Session(f"{path}?{settings}")  # chDB: one embedded path per process
        self.apply_schema()

    def apply_schema(self) -> None:
        """Idempotent: every statement is CREATE ... IF NOT EXISTS."""
        with self._lock:
            apply_schema(self._session.query, self._scalar, self.db)
            self._session.query(f"USE {self.db}")  # unqualified names in user queries mean this database
            for table, days in self.retention.items():
                self._set_retention(table, days)

    def _scalar(self, sql: str) -> str:
        res = self._session.query(sql, "TSV")
        return bytes(res.bytes()).decode().strip() if res is not None else ""

    def _set_retention(self, table: str, days: int) -> None:
        try:
            self._session.query(retention_statement(self.db, table, days))
        except Exception as e:
            if days > 0 or "TTL" not in str(e):  # removing an absent TTL is fine
                raise

    def insert_rows(self, rows: list[bytes], token: str) -> None:
        """RowBinary ``otel_traces`` rows: staged in a file the engine reads (bytes cannot travel in the SQL)."""
        if not rows:
            return
        staged = self.path / "insert.rowbinary"
        with self._lock:
            staged.write_bytes(b"".join(rows))
            try:
                self._session.query(
                    f"{rowbinary.insert_sql(self.db, token)} SELECT * FROM file('{_sql_str(str(staged))}', "
                    f"RowBinary, '{rowbinary.structure()}')"
                )
            finally:
                staged.unlink(missing_ok=True)

    def insert_spans(self, rows: list[dict[str, Any]], token: str = "") -> None:
        """Convenience for tests and tools: dict rows, encoded as the writer does."""
        self.insert_rows(
            [rowbinary.encode(r) for r in rows], token or f"adhoc:{id(rows)}:{len(rows)}:{time.monotonic_ns()}"
        )

    def query(self, sql: str, fmt: str = "JSONEachRow", params: dict[str, str] | None = None) -> bytes:
        with self._lock:
            res = self._session.query(sql, fmt, params=params) if params else self._session.query(sql, fmt)
        return bytes(res.bytes()) if res is not None else b""

    def close(self) -> None:
        with self._lock:
            try:
                self._session.close()
            except Exception:
                pass


def _sql_str(s: str) -> str:
    return s.replace("\\", "\\\\").replace("'", "\\'")
