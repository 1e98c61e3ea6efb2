"""A ClickHouse HTTP endpoint over chDB, for tests and benchmarks (no ClickHouse server can be installed here).

It speaks the part of the HTTP interface that clickhouse-connect uses: the query in
the ``query`` URL parameter and/or the body, data for INSERTs in the body (text formats,
RowBinary and Native, also through ``input()``; gzip, zstd or lz4 compressed or not),
``database`` (else the user's default database, per request), ``default_format``, a ``multipart/form-data``
body (the query and its parameters as form fields: clickhouse-connect sends large parameters so), basic or
X-ClickHouse-User/Key auth, ``/ping``, query parameters (``param_<name>``), and errors as
``Code: N. DB::Exception``. Other URL settings are applied with SET for the request: a request runs with
exactly its own (those of the request before that it does not name are reset to their defaults first; the
ones it repeats are not set again: a server takes them with the request, with no queries of its own).
``--read-user``/``--read-password`` add a second user whose queries run on a chDB session of their own
that the engine keeps read-only (``readonly = 2``: settings may change, data may not; chDB has no grants,
so ``SELECT`` on one database is the server's part).
``GET /_chhttp/log`` lists who ran what (the last 500: user and the statement's first words).

Run: ``python -m llmtap.testing.chhttp --path DIR --port PORT [--user U --password P]`` (or
:func:`llmtap.testing.harness.start_chhttp`); it prints ``{"port": N}`` when ready. Binds 127.0.0.1
only. Its SQL is passed to the engine as is: what it accepts is what a ClickHouse server accepts.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import gzip
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

NOT_SETTINGS = {
    "query",
    "database",
    "default_format",
    "session_id",
    "session_timeout",
    "session_check",
    "query_id",
    "user",
    "password",
    "compress",
    "decompress",
    "wait_end_of_query",
    "quota_key",
    "param_",
    "enable_http_compression",
    "http_headers_progress_interval_ms",
    "send_progress_in_http_headers",
    "client_protocol_version",
    "readonly",
}  # per-request readonly cannot be reset on a shared session; sqlguard covers it
_FORMAT_RE = re.compile(r"\bFORMAT\s+([A-Za-z0-9_]+)\s*;?\s*$", re.I)
# INSERT ... FORMAT <binary format>, in the query parameter or on the body's first line before the data
_INPUT_RE = re.compile(r"\binput\(\s*('(?:[^'\\]|\\.)*')\s*\)", re.I)
_BINARY_INSERT_RE = re.compile(rb"^\s*(INSERT\b[^\n]*?)\s+FORMAT\s+(RowBinary\w*|Native)[ \t]*(?:\r?\n|$)", re.I)


def _form_fields(ctype: str, body: bytes) -> dict[str, str]:
    """The fields of a ``multipart/form-data`` body (``query`` and ``param_<name>``), as a server reads them."""
    from email.parser import BytesParser
    from email.policy import HTTP

    msg = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
    fields: dict[str, str] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            fields[name] = payload.decode() if isinstance(payload, bytes) else str(part.get_payload())
    return fields


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--user", default="default")
    ap.add_argument("--password", default="")
    ap.add_argument("--read-user", default="")
    ap.add_argument("--read-password", default="")
    args = ap.parse_args()

    from collections import deque

    from chdb import session

    def open_session(read_only: bool) -> Any:
        s = session.Session(args.path)
        if read_only:
            s.query("SET readonly = 2")
        return s

    # A session is replaced after a failed query: chDB hands what a failed query had written to the next
    # query on the same session (see llmtap.store.embedded.FreshSession), which a server never does.
    sessions: dict[bool, Any] = {False: open_session(False)}
    default_db = bytes(sessions[False].query("SELECT currentDatabase()", "TSV").bytes()).decode().strip() or "default"
    locks = {False: threading.Lock(), True: threading.Lock()}
    if args.read_user:
        sessions[True] = open_session(True)
    seen: deque[tuple[str, str]] = deque(maxlen=500)
    applied: dict[int, dict[str, str]] = {}  # per session: the URL settings in force (set for an earlier request)

    def apply(session: Any, wanted: dict[str, str]) -> None:
        """The session's settings become ``wanted`` (unknown or client-side ones are skipped, as before)."""
        now = applied.setdefault(id(session), {})
        for k in [k for k in now if k not in wanted]:
            try:
                session.query(f"SET {k} = DEFAULT")
            except Exception:
                pass
            del now[k]
        for k, v in wanted.items():
            if now.get(k) == v:
                continue
            try:
                session.query(f"SET {k} = {v if re.fullmatch(r'-?[0-9.]+', v) else repr(v)}")
                now[k] = v
            except Exception:
                now.pop(k, None)  # client-side or unknown settings

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def _reply(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _user(self) -> str:
            """The authenticated user, '' when the credentials are wrong."""
            user, pw = self.headers.get("X-ClickHouse-User"), self.headers.get("X-ClickHouse-Key", "")
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Basic "):
                user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
            user, pw = user or "default", pw or ""
            if user == args.user and pw == args.password:
                return user
            if args.read_user and user == args.read_user and pw == args.read_password:
                return user
            return ""

        def _auth_ok(self) -> bool:
            return bool(self._user())

        def do_GET(self) -> None:
            if urlsplit(self.path).path == "/ping":
                self._reply(200, b"Ok.\n")
                return
            if urlsplit(self.path).path == "/_chhttp/log":
                self._reply(200, json.dumps(list(seen)).encode(), {"Content-Type": "application/json"})
                return
            self.do_POST()

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            params = dict(parse_qsl(url.query, keep_blank_values=True))
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = self._read_chunked()
            if not self._auth_ok():
                self._reply(
                    516,
                    b"Code: 516. DB::Exception: default: Authentication failed. (AUTHENTICATION_FAILED)\n",
                    {"X-ClickHouse-Exception-Code": "516"},
                )
                return
            enc = self.headers.get("Content-Encoding", "")
            if enc == "gzip":
                body = gzip.decompress(body)
            elif enc == "zstd":
                import zstandard

                body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
            elif enc == "lz4":
                import lz4.frame

                body = lz4.frame.decompress(body)
            ctype = self.headers.get("Content-Type", "")
            if ctype.lower().startswith("multipart/form-data"):  # what clickhouse-connect sends for large params
                params.update(_form_fields(ctype, body))
                body = b""
            query = params.get("query", "")
            binary = _BINARY_INSERT_RE.match(query.encode()) if query else _BINARY_INSERT_RE.match(body)
            data: bytes | memoryview = body
            if binary:  # INSERT ... FORMAT RowBinary/Native: the data cannot travel inside the SQL text
                sql, fmt = binary.group(1).decode(), binary.group(2).decode()
                if not query:
                    data = memoryview(body)[binary.end() :]  # no copy of a large body
            else:
                sql = "\n".join(part for part in (query, body.decode()) if part)  # INSERT ... FORMAT X + its data
                m = _FORMAT_RE.search(sql) if not (query and body) else None
                fmt = m.group(1) if m else params.get("default_format", "TabSeparated")
            settings = {k: v for k, v in params.items() if k not in NOT_SETTINGS and not k.startswith("param_")}
            bound = {k[6:]: v for k, v in params.items() if k.startswith("param_")}  # escaped text, as chDB takes it
            user = self._user()
            seen.append((user, " ".join(sql.split()[:6])))
            which = bool(args.read_user) and user == args.read_user
            with locks[which]:
                run_on = sessions[which]
                try:
                    # Each request runs in its ``database`` parameter, else the user's default one, as on
                    # a server: the shared session must not carry one request's database into the next.
                    run_on.query(f"USE {params.get('database') or default_db}")
                    apply(run_on, settings)
                    if binary and _INPUT_RE.search(sql):  # INSERT ... SELECT ... FROM input('structure')
                        staged = Path(args.path) / f"input-{threading.get_ident()}.bin"
                        staged.write_bytes(data)
                        try:
                            run_on.query(_INPUT_RE.sub(lambda m: f"file('{staged}', {fmt}, {m.group(1)})", sql, 1))
                        finally:
                            staged.unlink(missing_ok=True)
                        out = b""
                    elif binary:
                        with run_on.send_insert(sql, fmt) as ins:
                            ins.append(bytes(data))
                            ins.finish()
                        out = b""
                    else:
                        res = run_on.query(sql, fmt, params=bound) if bound else run_on.query(sql, fmt)
                        out = bytes(res.bytes()) if res is not None else b""
                except Exception as e:
                    applied.pop(id(run_on), None)
                    with contextlib.suppress(Exception):
                        run_on.close()
                    sessions[which] = open_session(which)
                    msg = str(e)
                    code = re.search(r"Code: (\d+)", msg)
                    self._reply(
                        500,
                        (msg if msg.startswith("Code:") else f"Code: 1001. DB::Exception: {msg}").encode(),
                        {"X-ClickHouse-Exception-Code": code.group(1) if code else "1001"},
                    )
                    return
            self._reply(
                200,
                out,
                {
                    "X-ClickHouse-Format": fmt,
                    "X-ClickHouse-Timezone": "UTC",
                    "X-ClickHouse-Server-Display-Name": "chdb-http",
                    "X-ClickHouse-Summary": json.dumps({"written_rows": "0"}),
                    "Content-Type": "text/plain; charset=UTF-8",
                },
            )

        def _read_chunked(self) -> bytes:
            out = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()

    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(json.dumps({"port": httpd.server_address[1]}), flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
