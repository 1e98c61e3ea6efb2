"""The embedded store: the ClickHouse engine in-process through chDB."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from . import DEFAULT_DB, retention_statement, schema_statements


class ChdbBackend:
    """One chDB session per process, serialized by a lock (chDB is not re-entrant)."""

    def __init__(self, path: Path, db: str = DEFAULT_DB, retention: dict[str, int] | None = None) -> None:
        from chdb import session

        path.mkdir(parents=True, exist_ok=True)
        self.db = db
        self.path = path
        self.retention = retention or {}
        self._lock = threading.Lock()
        self._session = session.Session(str(path))  # chDB: one embedded path per process
        self.apply_schema()

    def apply_schema(self) -> None:
        """Idempotent: every statement is CREATE ... IF NOT EXISTS."""
        with self._lock:
            for stmt in schema_statements(self.db):
                self._session.query(stmt)
            self._session.query(f"USE {self.db}")  # unqualified names in user queries mean this database
            for table, days in self.retention.items():
                self._set_retention(table, days)

    def _set_retention(self, table: str, days: int) -> None:
        try:
            self._session.query(retention_statement(self.db, table, days))
        except Exception as e:
            if days > 0 or "TTL" not in str(e):  # removing an absent TTL is fine
                raise

    def insert_rows(self, rows: list[bytes], token: str) -> None:
        if not rows:
            return
        sql = (
            f"INSERT INTO {self.db}.otel_traces SETTINGS insert_deduplication_token = '{token}', "
            "deduplicate_blocks_in_dependent_materialized_views = 1 FORMAT JSONEachRow\n"
        ) + b"\n".join(rows).decode()
        with self._lock:
            self._session.query(sql)

    def insert_spans(self, rows: list[dict[str, Any]], token: str = "") -> None:
        """Convenience for tests and tools: dict rows, serialized as the writer does."""
        lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() for r in rows]
        self.insert_rows(lines, token or f"adhoc:{id(rows)}:{len(rows)}:{time.monotonic_ns()}")

    def query(self, sql: str, fmt: str = "JSONEachRow") -> bytes:
        with self._lock:
            res = self._session.query(sql, fmt)
        return bytes(res.bytes()) if res is not None else b""

    def close(self) -> None:
        with self._lock:
            try:
                self._session.close()
            except Exception:
                pass
