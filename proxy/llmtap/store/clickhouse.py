"""The ClickHouse server store (``clickhouse://`` / ``clickhouses://``), via clickhouse-connect."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ..errors import LlmtapError
from . import rowbinary
from .readonly import Cancellations, EngineParser, LocalParser, QueryLimits, tagged
from .schema import DB_NAME_RE, DEFAULT_DB, apply_schema, retention_statement


class ClickHouseURLError(LlmtapError, ValueError):
    pass


# The HTTP library's retry warnings and clickhouse-connect's "Unexpected Http Driver Exception" say, in many
# lines, what llmtap says in one (:func:`failure_text`, naming the store): theirs are kept for real errors only.
for _name in ("urllib3.connectionpool", "clickhouse_connect"):
    logging.getLogger(_name).setLevel(logging.ERROR)

_ERRNO_RE = re.compile(r"\[Errno -?\d+\] ([^'\"()\]]+)")
_SERVER_RE = re.compile(r"Code: \d+\. DB::Exception: (.+)")


def failure_text(e: BaseException) -> str:
    """A store error as one line: the connection's cause (``Connection refused``, ``Name or service not known``,
    ``timed out``) or the server's own message with its code, never a connection pool's exception text."""
    text = str(e)
    if m := _ERRNO_RE.search(text):
        return f"cannot connect: {m.group(1).strip().rstrip('.')}"
    if "timed out" in text.lower() or isinstance(e, TimeoutError):
        return "cannot connect: timed out"
    if m := _SERVER_RE.search(text):
        return f"the server refused: {m.group(1).split(' (version ')[0].strip()[:200]}"
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return first[:200]


def parse_url(url: str) -> dict[str, Any]:
    u = urlsplit(url)
    if u.scheme not in ("clickhouse", "clickhouses"):
        raise ClickHouseURLError(f"not a clickhouse:// URL: {u.scheme}://…")
    if not u.hostname:
        raise ClickHouseURLError("--store: a clickhouse:// URL needs a host, e.g. clickhouse://user:pass@host:8123/db")
    try:
        port = u.port
    except ValueError:
        bad = u.netloc.rpartition("@")[2].rpartition(":")[2]  # never echo the password
        raise ClickHouseURLError(
            f"--store: invalid port {bad!r} in the clickhouse:// URL: use clickhouse://user:pass@host:8123/db"
        ) from None
    db = u.path.strip("/") or DEFAULT_DB
    if not DB_NAME_RE.match(db):
        raise ClickHouseURLError(f"--store: invalid database name {db!r} (letters, digits, _)")
    opts = dict(parse_qsl(u.query))
    secure = u.scheme == "clickhouses"
    return {
        "host": u.hostname,
        "port": port or (8443 if secure else 8123),
        "username": unquote(u.username or "default"),
        "password": unquote(u.password or ""),
        "database": db,
        "secure": secure,
        "async_insert": opts.get("async_insert", "0") in ("1", "true"),
        "ca_cert": opts.get("ca_cert"),
    }


def connect_client(cfg: dict[str, Any], database: str | None, connect_timeout: float, receive_timeout: float) -> Any:
    import clickhouse_connect

    kw: dict[str, Any] = {}
    if cfg["ca_cert"]:
        kw["ca_cert"] = cfg["ca_cert"]
    return clickhouse_connect.get_client(
        host=cfg["host"],
        port=cfg["port"],
        username=cfg["username"],
        password=cfg["password"],
        secure=cfg["secure"],
        database=database,
        connect_timeout=connect_timeout,
        send_receive_timeout=receive_timeout,
        compress=False,
        **kw,
    )


class ClickHouseBackend:
    """The writer's connection, and a read connection of its own for admin queries: with the
    credentials of ``read_url`` when given (a user with ``SELECT`` on the llmtap database only,
    see docs/security.md), ``readonly = 1`` and :class:`~llmtap.store.readonly.QueryLimits` on
    every query, a query id to cancel it by.

    ``read_only`` (the read commands, with ``writer=False``): the schema is neither created nor
    upgraded (a reader may lack the grants); a database without llmtap's tables is refused."""

    def __init__(
        self,
        url: str,
        connect_timeout: float = 5.0,
        retention: dict[str, int] | None = None,
        read_url: str = "",
        limits: QueryLimits | None = None,
        writer: bool = True,
        read_only: bool = False,
    ) -> None:
        self.cfg = parse_url(url)
        self.read_cfg = parse_url(read_url) if read_url else self.cfg
        if self.read_cfg["database"] != self.cfg["database"]:
            raise ClickHouseURLError("the read URL must name the same database as --store")
        self.read_only = read_only
        self.retention = retention or {}
        self.limits = limits or QueryLimits()
        self.db = self.cfg["database"]
        self._lock = threading.Lock()
        self._client: Any = None
        self._connect_timeout = connect_timeout
        self._schema_ready = False
        self._read_lock = threading.Lock()
        self._read_clients: list[Any] = []
        self._parser: EngineParser | None = None
        self.cancels = Cancellations()
        self.start_error = ""  # why the store did not answer at start ('' when it did)
        if not writer:
            return  # reads only: the writer's connection (and the schema) is never needed
        try:
            self._ensure()
        except Exception as e:
            self.start_error = failure_text(e)  # the writer retries; the sidecar must start while the store is away

    @property
    def ready(self) -> bool:
        """The store answered (and has the schema): false when it was away at start."""
        return self._schema_ready

    def _ensure(self) -> Any:
        if self._client is None:
            self._client = connect_client(self.cfg, None, self._connect_timeout, 30)
        if not self._schema_ready:
            if self.read_only:
                self._check_schema()
            else:
                self.apply_schema()
        # Every later request runs in the store's database: the read paths (``sql``, ``report``,
        # ``check-cost``, the viewer) name tables unqualified, as they do on the embedded store.
        self._client.database = self.db
        return self._client

    def apply_schema(self) -> None:
        """Versioned and idempotent (see :func:`llmtap.store.schema.apply_schema`).

        Runs in the user's default database (the store's may not exist yet); every statement
        names its database.
        """
        c = self._client
        c.database = None
        apply_schema(c.command, c.command, self.db)
        for table, days in self.retention.items():
            try:
                c.command(retention_statement(self.db, table, days))
            except Exception as e:
                if days > 0 or "TTL" not in str(e):  # removing an absent TTL is fine
                    raise
        self._schema_ready = True

    def _check_schema(self) -> None:
        c = self._client
        c.database = None
        if str(c.command(f"EXISTS TABLE {self.db}.llm_calls")).strip() != "1":
            raise ClickHouseURLError(
                f"no llmtap tables in database {self.db!r} on {self.cfg['host']}:{self.cfg['port']} "
                "(a sidecar writing there creates them, or: llmtap schema --apply --store URL)"
            )
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
                known = getattr(c, "server_settings", {}) or {}  # an older server lacks some of them
                fast = {k: v for k, v in rowbinary.INSERT_SETTINGS.items() if k in known}
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
                            **fast,
                        },
                        fmt="RowBinary",
                    )
                else:
                    sql = (
                        f"{rowbinary.insert_sql(self.db, token, settings=fast)} "
                        f"SELECT * FROM input('{rowbinary.structure()}') FORMAT RowBinary\n"
                    )
                    c.raw_insert(insert_block=b"".join([sql.encode(), *rows]))
            except Exception:
                self._reset()
                raise

    def query(self, sql: str, fmt: str = "JSONEachRow", params: dict[str, str] | None = None) -> bytes:
        """llmtap's own SQL (tools): never a query someone else wrote; ``params`` bound by the server."""
        with self._lock:
            try:
                c = self._ensure()
                return bytes(c.raw_query(sql, parameters=params or None, fmt=fmt))
            except Exception:
                self._reset()
                raise

    # -- the read side: admin queries ------------------------------------------------------------
    def _reader(self) -> Any:
        with self._read_lock:
            if self._read_clients:
                return self._read_clients.pop()
        c = connect_client(self.read_cfg, self.db, self._connect_timeout, self.limits.max_execution_time + 10)
        if self.read_only and not self._schema_ready:
            if str(c.command(f"EXISTS TABLE {self.db}.llm_calls")).strip() != "1":
                c.close()
                raise ClickHouseURLError(
                    f"no llmtap tables in database {self.db!r} on {self.cfg['host']}:{self.cfg['port']} "
                    "(a sidecar writing there creates them, or: llmtap schema --apply --store URL)"
                )
            self._schema_ready = True
        return c

    def _release(self, client: Any) -> None:
        with self._read_lock:
            if len(self._read_clients) < 4:
                self._read_clients.append(client)
                return
        client.close()

    def read(self, sql: str, fmt: str = "JSONEachRow", params: Mapping[str, str] | None = None, tag: str = "") -> bytes:
        """A checked admin query: its own connection, ``readonly = 1``, the limits, ``query_id`` = ``tag``."""
        settings: dict[str, Any] = {
            "readonly": 1,
            "cancel_http_readonly_queries_on_client_close": 1,
            **self.limits.settings(),
        }
        if tag:
            settings["query_id"] = f"llmtap-admin-{tag}"
            sql = tagged(sql, tag)
        self.cancels.check(tag)  # its client went away while it was being checked: never sent
        c = self._reader()
        if self.cancels.cancelled(tag):
            self._release(c)
            self.cancels.check(tag)
        # A user the server already keeps read-only may not change these: its profile's values apply.
        fixed = getattr(c, "server_settings", {}) or {}
        settings = {k: v for k, v in settings.items() if not getattr(fixed.get(k), "readonly", False)}
        try:
            out = bytes(c.raw_query(sql, parameters=dict(params) if params else None, settings=settings, fmt=fmt))
        except Exception:
            c.close()
            raise
        self._release(c)
        return out

    def cancel(self, tag: str = "") -> None:
        if not tag.isalnum():
            raise ValueError("a query tag is alphanumeric")
        self.cancels.cancel(tag)
        c = self._reader()
        try:
            c.command("KILL QUERY WHERE query_id = {q:String} ASYNC", parameters={"q": f"llmtap-admin-{tag}"})
        finally:
            self._release(c)

    def _engine_parser(self) -> EngineParser:
        """The server's parser when it has ``parseQueryToJSON`` (ClickHouse 26.8+), else the embedded engine's."""
        if self._parser is None:
            server = EngineParser(lambda sql, params: self.read(sql, "JSONEachRow", params))
            try:
                server.syntax_tree("SELECT 1")
                self._parser = server
            except Exception as e:
                if "UNKNOWN_FUNCTION" not in str(e) and "Code: 46" not in str(e):
                    raise
                self._parser = LocalParser()
        return self._parser

    def canonical(self, sql: str) -> str:
        return self._engine_parser().canonical(sql)

    def syntax_tree(self, sql: str) -> dict[str, Any] | None:
        return self._engine_parser().syntax_tree(sql)

    def engine_names(self) -> frozenset[str]:
        """The server's own function names, whichever parser checks the text: a newer server may call more."""
        return EngineParser(lambda sql, params: self.read(sql, "JSONEachRow", params)).engine_names()

    def close(self) -> None:
        with self._read_lock:
            clients, self._read_clients = self._read_clients, []
        for c in clients:
            try:
                c.close()
            except Exception:
                pass
        with self._lock:
            if self._client is not None:
                try:
                    self._client.close()
                except Exception:
                    pass
                self._client = None
