"""The embedded store: the ClickHouse engine in-process through chDB."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import rowbinary
from .readonly import TAG_PREFIX, Cancellations, EngineParser, QueryLimits, param_values, tagged
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


class FreshSession:
    """A chDB session that is never used again after a failed query: the next query gets a new one.

    chDB hands what a failed or cancelled query had already written to the next query on the same session, as
    the start of its result (rows of another query, the last one possibly cut mid-row: ``{`` followed by the
    next answer is what a JSON reader calls "Expecting property name enclosed in double quotes"). Every
    session llmtap keeps is one of these, or is closed by its owner after a failure (the read sessions)."""

    def __init__(self, open_session: Callable[[], Any]) -> None:
        self._open = open_session
        self._session: Any = None

    def query(self, sql: str, fmt: str = "CSV", params: Mapping[str, str] | None = None) -> Any:
        if self._session is None:
            self._session = self._open()
        try:
            return self._session.query(sql, fmt, params=dict(params)) if params else self._session.query(sql, fmt)
        except BaseException:
            _close(self._session)
            self._session = None
            raise

    def close(self) -> None:
        if self._session is not None:
            _close(self._session)
            self._session = None


class ChdbBackend:
    """The writer's chDB session (serialized by a lock: a session runs one query at a time), and
    read sessions of their own for admin queries: read-only, bounded, cancellable, never waiting
    behind an insert nor making one wait (sessions on one path run concurrently). At most
    :data:`READERS` run at once; a read waiting for one is woken and dropped when its tag is
    cancelled. The guard's parser has a session of its own, so checking a query never waits
    behind a long read. A session whose query failed (cancelled, over a limit, refused) is
    closed, never reused: chDB keeps what a cancelled query had written and hands it out as the
    start of the next query's result on that session."""

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
        self._session = FreshSession(self._writer_session)  # chDB: one embedded path per process
        self._idle: list[Any] = []  # read sessions not in use
        self._reader_count = 0
        self._readers_cv = threading.Condition()
        self.cancels = Cancellations()
        self._control = FreshSession(lambda: session.Session(self._conn_str))
        self._control_lock = threading.Lock()
        self._parse_session: Any = None
        self._parse_lock = threading.Lock()
        self.parser = EngineParser(self._parse)
        self.apply_schema()

    def _writer_session(self) -> Any:
        from chdb import session

        s = session.Session(self._conn_str)
        s.query(f"CREATE DATABASE IF NOT EXISTS {self.db}")
        s.query(f"USE {self.db}")  # unqualified names in llmtap's own queries mean this database
        return s

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
            res = self._session.query(sql, fmt, params)
        return bytes(res.bytes()) if res is not None else b""

    # -- the read side: admin queries ------------------------------------------------------------
    def canonical(self, sql: str) -> str:
        return self.parser.canonical(sql)

    def syntax_tree(self, sql: str) -> dict[str, Any] | None:
        return self.parser.syntax_tree(sql)

    def engine_names(self) -> frozenset[str]:
        return self.parser.engine_names()

    def _new_reader(self) -> Any:
        from chdb import session

        s = session.Session(self._conn_str)
        s.query(f"USE {self.db}")  # unqualified names mean llmtap's tables
        for k, v in self.limits.settings().items():
            s.query(f"SET {k} = {v!r}" if isinstance(v, str) else f"SET {k} = {int(v)}")
        s.query("SET readonly = 1")  # last: from here on the session can change no setting either
        return s

    def _parse(self, sql: str, params: Mapping[str, str]) -> bytes:
        """The guard's parser queries (llmtap's SQL, the text a bound parameter) on a read-only session of its own."""
        with self._parse_lock:
            if self._parse_session is None:
                self._parse_session = self._new_reader()
            try:
                res = self._parse_session.query(sql, "JSONEachRow", params=param_values(params))
            except Exception:
                _close(self._parse_session)
                self._parse_session = None
                raise
            return bytes(res.bytes()) if res is not None else b""

    def _take_reader(self, tag: str) -> Any:
        """An idle read session, a new one below :data:`READERS`, or the next one given back; never for a
        cancelled tag (a waiting read is woken by :meth:`cancel`)."""
        deadline = time.monotonic() + self.limits.max_execution_time + 5
        with self._readers_cv:
            while True:
                self.cancels.check(tag)
                if self._idle:
                    return self._idle.pop()
                if self._reader_count < READERS:
                    self._reader_count += 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("every admin query session is busy; try again")
                self._readers_cv.wait(left)
        try:
            return self._new_reader()
        except Exception:
            with self._readers_cv:
                self._reader_count -= 1
                self._readers_cv.notify()
            raise

    def _give_back(self, s: Any, failed: bool = False) -> None:
        """A read session back to the idle ones; or, after a failed query, closed and its place freed."""
        if failed:
            _close(s)
        with self._readers_cv:
            if failed:
                self._reader_count -= 1
            else:
                self._idle.append(s)
            self._readers_cv.notify()

    def read(self, sql: str, fmt: str = "JSONEachRow", params: Mapping[str, str] | None = None, tag: str = "") -> bytes:
        """A checked admin query on a read session (``readonly = 1``, :class:`QueryLimits`)."""
        s = self._take_reader(tag)
        if self.cancels.cancelled(tag):  # cancelled while it waited for the session: it never starts
            self._give_back(s)
            self.cancels.check(tag)
        try:
            res = s.query(tagged(sql, tag) if tag else sql, fmt, params=param_values(params))
            out = bytes(res.bytes()) if res is not None else b""
        except BaseException:
            self._give_back(s, failed=True)
            raise
        self._give_back(s)
        return out

    def cancel(self, tag: str = "") -> None:
        """Stop the admin query tagged ``tag`` (every admin query when empty)."""
        prefix = TAG_PREFIX + (f"{tag} */" if tag else "")
        if tag and not tag.isalnum():
            raise ValueError("a query tag is alphanumeric")
        self.cancels.cancel(tag)
        with self._readers_cv:
            self._readers_cv.notify_all()  # a read of this tag waiting for a session gives up now
        with self._control_lock:
            self._control.query(f"KILL QUERY WHERE startsWith(query, '{prefix}') ASYNC")

    def close(self) -> None:
        try:
            if self._reader_count:
                self.cancel()
        except Exception:
            pass
        with self._readers_cv:
            idle, self._idle = self._idle, []
        with self._parse_lock:
            if self._parse_session is not None:
                idle.append(self._parse_session)
                self._parse_session = None
        for s in idle:
            try:
                s.close()
            except Exception:
                pass
        with self._control_lock:
            self._control.close()
        with self._lock:
            try:
                self._session.close()
            except Exception:
                pass


def _close(session: Any) -> None:
    try:
        session.close()
    except Exception:
        pass


def _sql_str(s: str) -> str:
    return s.replace("\\", "\\\\").replace("'", "\\'")
