"""Admin HTTP: ``/metrics``, ``/healthz``, ``POST /api/sql`` (read-only) and ``/``.

A small threaded stdlib server: it runs beside the proxy's event loop, so a slow
query never touches the traffic.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..telemetry.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from ..telemetry.metrics import Metrics
from . import viewer, viewer_api
from .sqlguard import ReadOnlyViolation, check_read_only

log = logging.getLogger("llmtap.admin")
MAX_SQL_BYTES = 1024 * 1024
CONTENT_TYPES = {
    "JSON": "application/json",
    "JSONEachRow": "application/x-ndjson",
    "CSV": "text/csv",
    "CSVWithNames": "text/csv",
}

QueryFn = Callable[..., bytes]  # (sql, format[, params]) → body
STATIC_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/viewer.css": ("viewer.css", "text/css; charset=utf-8"),
}
STATIC_JS = viewer.STATIC / "js"  # the viewer's ES modules: /js/<name>.js and /js/pages/<name>.js


class AdminState:
    def __init__(
        self,
        metrics: Metrics,
        query: QueryFn,
        health: Callable[[], dict[str, Any]],
        token: str = "",
        grafana_url: str = "",
    ) -> None:
        self.metrics = metrics
        self.query = query
        self.health = health
        self.token = token
        self.grafana_url = grafana_url
        self.probe = viewer_api.StoreProbe(query)


def run_sql(query: QueryFn, sql: str, fmt: str) -> bytes:
    """Guarded read-only query through ``query``; raises ReadOnlyViolation or the store's error."""
    stmt = check_read_only(sql)
    if not fmt.replace("_", "").isalnum():
        raise ReadOnlyViolation(f"invalid output format {fmt!r}")
    return query(stmt, fmt)


class _Handler(BaseHTTPRequestHandler):
    server_version = "llmtap-admin"
    state: AdminState

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("admin: " + format, *args)

    def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self) -> bool:
        if not self.state.token:
            return True
        if self.headers.get("Authorization", "") == f"Bearer {self.state.token}":
            return True
        self._send(401, b"missing or wrong bearer token\n")
        return False

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/healthz":
            h = self.state.health()
            self._send(200 if h.get("status") == "ok" else 503, json.dumps(h).encode(), "application/json")
            return
        if not self._authorized():
            return
        if url.path == "/metrics":
            self._send(200, self.state.metrics.exposition(), METRICS_CONTENT_TYPE)
        elif url.path in STATIC_FILES:
            name, ctype = STATIC_FILES[url.path]
            self._send(200, (viewer.STATIC / name).read_bytes(), ctype)
        elif url.path.startswith("/js/") and (js := _module(url.path)) is not None:
            self._send(200, js.read_bytes(), "text/javascript; charset=utf-8")
        elif url.path == "/api/status":
            self._send(200, json.dumps({"store": self.state.probe.status()}).encode(), "application/json")
        elif url.path == "/api/dashboards":
            boards = viewer.load_dashboards()
            listing = [{"uid": b["uid"], "title": b["title"]} for b in boards.values()]
            self._send(200, json.dumps(listing).encode(), "application/json")
        elif url.path.startswith("/api/dashboards/"):
            board = viewer.load_dashboards().get(url.path.rsplit("/", 1)[1])
            if board is None:
                self._send(404, b"no such dashboard\n")
            else:
                self._send(200, json.dumps(board).encode(), "application/json")
        else:
            self._send(404, b"not found\n")

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        if url.path in ("/api/panel", "/api/variable"):
            if self._authorized():
                self._viewer(url.path)
            return
        if url.path in viewer_api.ROUTES:
            if self._authorized():
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    req = json.loads(self.rfile.read(min(n, MAX_SQL_BYTES)) or b"{}")
                except ValueError:
                    req = None
                code, out = viewer_api.handle(url.path, self.state.query, req, self.state.grafana_url)
                self._send(code, json.dumps(out, default=str).encode(), "application/json")
            return
        if url.path != "/api/sql":
            self._send(404, b"not found\n")
            return
        if not self._authorized():
            return
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_SQL_BYTES:
            self._send(413, b"query too large\n")
            return
        raw = self.rfile.read(n).decode("utf-8", "replace")
        fmt = parse_qs(url.query).get("format", ["JSONEachRow"])[0]
        sql = raw
        if self.headers.get("Content-Type", "").startswith("application/json"):
            try:
                req = json.loads(raw)
                sql, fmt = req["query"], req.get("format", fmt)
            except (ValueError, KeyError, TypeError):
                self._send(400, b'expected {"query": "...", "format": "..."}\n')
                return
        try:
            body = run_sql(self.state.query, sql, fmt)
        except ReadOnlyViolation as e:
            self._send(403, f"refused: {e}\n".encode())
            return
        except Exception as e:
            self._send(400, f"query failed: {e}\n".encode())
            return
        self._send(200, body, CONTENT_TYPES.get(fmt, "text/plain; charset=utf-8"))

    def _viewer(self, path: str) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(min(n, MAX_SQL_BYTES)) or b"{}")
            boards = viewer.load_dashboards()
            if path == "/api/panel":
                out: Any = viewer.panel_data(self.state.query, boards, req)
            else:
                out = viewer.variable_values(self.state.query, boards, req)
        except (ValueError, ReadOnlyViolation) as e:
            self._send(400, json.dumps({"error": str(e)}).encode(), "application/json")
            return
        except Exception as e:
            if viewer_api.unreachable(e):
                body = {"error": f"store unreachable: {viewer_api.short(e)}", "store_unreachable": True}
                self._send(503, json.dumps(body).encode(), "application/json")
            else:
                self._send(500, json.dumps({"error": f"query failed: {e}"[:2000]}).encode(), "application/json")
            return
        self._send(200, json.dumps(out, default=str).encode(), "application/json")


def _module(path: str) -> Path | None:
    """A file of the viewer's modules, by its URL path; nothing outside ``static/js``."""
    rel = path.removeprefix("/js/")
    if not rel.endswith(".js") or ".." in rel or rel.startswith("/") or "\\" in rel:
        return None
    f = (STATIC_JS / rel).resolve()
    return f if f.is_file() and STATIC_JS.resolve() in f.parents else None


class AdminServer:
    def __init__(self, host: str, port: int, state: AdminState) -> None:
        handler = type("Handler", (_Handler,), {"state": state})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.address = self.httpd.server_address
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="llmtap-admin", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
