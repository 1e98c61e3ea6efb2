"""The ClickHouse server store (``clickhouse://`` / ``clickhouses://``), via clickhouse-connect."""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from . import rowbinary
from .schema import DB_NAME_RE, DEFAULT_DB, apply_schema, retention_statement


class ClickHouseURLError(ValueError):
    pass


def parse_url(url: str) -> dict[str, Any]:
    u = urlsplit(url)
    if u.scheme not in ("clickhouse", "clickhouses"):
        raise ClickHouseURLError(f"not a clickhouse:// URL: {url!r}")
    if not u.hostname:
        raise ClickHouseURLError("clickhouse:// URL needs a host, e.g. clickhouse://user:pass@host:8123/db")
    db = u.path.strip("/") or DEFAULT_DB
    if not DB_NAME_RE.match(db):
        raise ClickHouseURLError(f"invalid database name {db!r}")
    opts = dict(parse_qsl(u.query))
    secure = u.scheme == "clickhouses"
    return {
        "host": u.hostname,
        "port": u.port or (8443 if secure else 8123),
        "username": unquote(u.username or "default"),
        "password": unquote(u.password or ""),
        "database": db,
        "secure": secure,
        "async_insert": opts.get("async_insert", "0") in ("1", "true"),
        "ca_cert": opts.get("ca_cert"),
    }


class ClickHouseBackend:
    def __init__(self, url: str, connect_timeout: float = 5.0, retention: dict[str, int] | None = None) -> None:
        self.cfg = parse_url(url)
        self.retention = retention or {}
        self.db = self.cfg["database"]
        self._lock = threading.Lock()
        self._client: Any = None
        self._connect_timeout = connect_timeout
        self._schema_ready = False
        try:
            self._ensure()
        except Exception:
            pass  # the writer retries; the sidecar must start while the store is away

    def _ensure(self) -> Any:
        if self._client is None:
            import clickhouse_connect

            kw: dict[str, Any] = {}
            if self.cfg["ca_cert"]:
                kw["ca_cert"] = self.cfg["ca_cert"]
            self._client = clickhouse_connect.get_client(
                host=self.cfg["host"],
                port=self.cfg["port"],
                username=self.cfg["username"],
                password=self.cfg["password"],
                secure=self.cfg["secure"],
                database="default",
                connect_timeout=self._connect_timeout,
                send_receive_timeout=30,
                compress=False,
                **kw,
            )
        if not self._schema_ready:
            self.apply_schema()
        return self._client

    def apply_schema(self) -> None:
        """Versioned and idempotent (see :func:`llmtap.store.schema.apply_schema`)."""
        c = self._client
        apply_schema(c.command, c.command, self.db)
        for table, days in self.retention.items():
            try:
                c.command(retention_statement(self.db, table, days))
            except Exception as e:
                if days > 0 or "TTL" not in str(e):  # removing an absent TTL is fine
                    raise
        self._schema_ready = True

    def _reset(self) -> None:
        self._client = None
        self._schema_ready = False

    def insert_rows(self, rows: list[bytes], token: str) -> None:
        """RowBinary ``otel_traces`` rows, one HTTP insert; ``token`` deduplicates a re-sent batch.

        The body is read through ``input()`` with plain String types and cast into the table's
        LowCardinality columns per block (parsing RowBinary as LowCardinality is ~3x slower).
        The statement leads the body, on its own line, and the rows follow (ClickHouse reads a
        POST body as query, then data): sent through ``raw_insert``, which passes the body as
        is — ``command(data=...)`` decodes the whole body to classify the SQL, ~20% of an
        insert's time. Async inserts need a plain ``INSERT ... FORMAT``, so
        ``?async_insert=1`` sends that.
        """
        with self._lock:
            try:
                c = self._ensure()
                if self.cfg["async_insert"]:
                    c.raw_insert(
                        f"{self.db}.{rowbinary.TABLE}",
                        rowbinary.COLUMN_NAMES,
                        b"".join(rows),
                        settings={
                            "insert_deduplication_token": token,
                            "deduplicate_blocks_in_dependent_materialized_views": 1,
                            "async_insert": 1,
                            "wait_for_async_insert": 1,
                        },
                        fmt="RowBinary",
                    )
                else:
                    sql = (
                        f"{rowbinary.insert_sql(self.db, token)} SELECT * FROM input('{rowbinary.structure()}') "
                        "FORMAT RowBinary\n"
                    )
                    c.raw_insert(insert_block=b"".join([sql.encode(), *rows]))
            except Exception:
                self._reset()
                raise

    def query(self, sql: str, fmt: str = "JSONEachRow", params: dict[str, str] | None = None) -> bytes:
        with self._lock:
            try:
                c = self._ensure()
                # sqlguard checked it too; values travel as query parameters, never in the text
                return bytes(c.raw_query(sql, parameters=params or None, fmt=fmt, settings={"readonly": 1}))
            except Exception:
                self._reset()
                raise

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                try:
                    self._client.close()
                except Exception:
                    pass
                self._client = None
