"""The embedded store: the ClickHouse engine in-process through chDB."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import rowbinary
from .readonly import TAG_PREFIX, EngineParser, QueryLimits, param_values, tagged
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


READERS = 2  # admin queries running at once; each has its own session


class ChdbBackend:
    """The writer's chDB session (serialized by a lock: a session runs one query at a time), and
    read sessions of their own for admin queries: read-only, bounded, cancellable, never waiting
    behind an insert nor making one wait (sessions on one path run concurrently)."""

    def __init__(
        self,
        path: Path,
        db: str = DEFAULT_DB,
        retention: dict[str, int] | None = None,
        limits: QueryLimits | None = None,
    ) -> None:
        from chdb import session

        path.mkdir(parents=True, exist_ok=True)
        self.db = db
        self.path = path
        self.retention = retention or {}
        self.limits = limits or QueryLimits()
        self._lock = threading.Lock()
        settings = "&".join(f"{k}={v}" for k, v in ENGINE_SETTINGS.items())
        self._conn_str = f"{path}?{settings}"
        self._session = session.Session(self._conn_str)  # chDB: one embedded path per process
        self._readers: queue.Queue[Any] = queue.Queue()
        self._reader_count = 0
        self._readers_lock = threading.Lock()
        self._control: Any = None
        self._control_lock = threading.Lock()
        self.parser = EngineParser(lambda sql, params: self.read(sql, "JSONEachRow", params))
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
                self._insert_file(staged, token)
            finally:
                staged.unlink(missing_ok=True)

    def insert_file(self, path: str, token: str) -> None:
        """RowBinary ``otel_traces`` rows already in a file (the engine process's client stages them)."""
        with self._lock:
            self._insert_file(Path(path), token)

    def _insert_file(self, staged: Path, token: str) -> None:
        self._session.query(
            f"{rowbinary.insert_sql(self.db, token)} SELECT * FROM file('{_sql_str(str(staged))}', "
            f"RowBinary, '{rowbinary.structure()}')"
        )

    def insert_spans(self, rows: list[dict[str, Any]], token: str = "") -> None:
        """Convenience for tests and tools: dict rows, encoded as the writer does."""
        self.insert_rows(
            [rowbinary.encode(r) for r in rows], token or f"adhoc:{id(rows)}:{len(rows)}:{time.monotonic_ns()}"
        )

    def query(self, sql: str, fmt: str = "JSONEachRow", params: dict[str, str] | None = None) -> bytes:
        """llmtap's own SQL (schema, tools, tests) on the writer's session: never a user's query."""
        with self._lock:
            res = self._session.query(sql, fmt, params=params) if params else self._session.query(sql, fmt)
        return bytes(res.bytes()) if res is not None else b""

    # -- the read side: admin queries ------------------------------------------------------------
    def canonical(self, sql: str) -> str:
        return self.parser.canonical(sql)

    def syntax_tree(self, sql: str) -> dict[str, Any] | None:
        return self.parser.syntax_tree(sql)

    def _new_reader(self) -> Any:
        from chdb import session

        s = session.Session(self._conn_str)
        s.query(f"USE {self.db}")  # unqualified names mean llmtap's tables
        for k, v in self.limits.settings().items():
            s.query(f"SET {k} = {v!r}" if isinstance(v, str) else f"SET {k} = {int(v)}")
        s.query("SET readonly = 1")  # last: from here on the session can change no setting either
        return s

    def _take_reader(self) -> Any:
        try:
            return self._readers.get_nowait()
        except queue.Empty:
            pass
        with self._readers_lock:
            if self._reader_count < READERS:
                self._reader_count += 1
                try:
                    return self._new_reader()
                except Exception:
                    self._reader_count -= 1
                    raise
        try:
            return self._readers.get(timeout=self.limits.max_execution_time + 5)
        except queue.Empty:
            raise TimeoutError("every admin query session is busy; try again") from None

    def read(self, sql: str, fmt: str = "JSONEachRow", params: Mapping[str, str] | None = None, tag: str = "") -> bytes:
        """A checked admin query on a read session (``readonly = 1``, :class:`QueryLimits`)."""
        s = self._take_reader()
        try:
            res = s.query(tagged(sql, tag) if tag else sql, fmt, params=param_values(params))
            return bytes(res.bytes()) if res is not None else b""
        finally:
            self._readers.put(s)

    def cancel(self, tag: str = "") -> None:
        """Stop the admin query tagged ``tag`` (every admin query when empty)."""
        prefix = TAG_PREFIX + (f"{tag} */" if tag else "")
        if tag and not tag.isalnum():
            raise ValueError("a query tag is alphanumeric")
        with self._control_lock:
            if self._control is None:
                from chdb import session

                self._control = session.Session(self._conn_str)
            self._control.query(f"KILL QUERY WHERE startsWith(query, '{prefix}') ASYNC")

    def close(self) -> None:
        try:
            if self._reader_count:
                self.cancel()
        except Exception:
            pass
        while True:
            try:
                s = self._readers.get_nowait()
            except queue.Empty:
                break
            try:
                s.close()
            except Exception:
                pass
        with self._control_lock:
            if self._control is not None:
                try:
                    self._control.close()
                except Exception:
                    pass
                self._control = None
        with self._lock:
            try:
                self._session.close()
            except Exception:
                pass


def _sql_str(s: str) -> str:
    return s.replace("\\", "\\\\").replace("'", "\\'")
