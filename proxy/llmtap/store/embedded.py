"""The embedded store: the ClickHouse engine in-process through chDB."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from . import DEFAULT_DB, retention_statement, schema_statements


class ChdbBackend:
    """One chDB session per process, serialized by a lock (chDB is not re-entrant)."""

    def __init__(self, path: Path, db: str = DEFAULT_DB) -> None:
        from chdb import session

        path.mkdir(parents=True, exist_ok=True)
        self.db = db
        self.path = path
        self._lock = threading.Lock()
        self._session = session.Session(str(path))  # chDB: one embedded path per process
        self.apply_schema()

    def apply_schema(self) -> None:
        """Idempotent: every statement is CREATE ... IF NOT EXISTS."""
        with self._lock:
            for stmt in schema_statements(self.db):
                self._session.query(stmt)
            self._session.query(f"USE {self.db}")  # unqualified names in user queries mean this database

    def set_retention(self, table: str, days: int) -> None:
        stmt = retention_statement(self.db, table, days)
        with self._lock:
            try:
                self._session.query(stmt)
            except Exception as e:
                if days > 0 or "TTL" not in str(e):  # removing an absent TTL is fine
                    raise

    def insert_spans(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        payload = "\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in rows)
        sql = f"INSERT INTO {self.db}.otel_traces FORMAT JSONEachRow\n{payload}"
        with self._lock:
            self._session.query(sql)

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
