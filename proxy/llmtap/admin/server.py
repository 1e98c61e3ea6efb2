"""Admin HTTP: ``/metrics``, ``/healthz``, ``POST /api/sql`` (read-only), the viewer (``/``) and its API.

The transport and its limits are :mod:`.http` (its own event loop, bounded workers, timeouts); who
may ask is :mod:`.auth` (token, session cookie, Host and Origin checks); what a query may do is
:mod:`.reads` and :mod:`.sqlguard`. ``POST /api/sql`` takes ``{"query": ..., "format": ...,
"params": {...}}`` as ``application/json`` with the token.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..telemetry.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from ..telemetry.metrics import Metrics
from . import viewer, viewer_api
from .auth import COOKIE, SECURITY_HEADERS, AdminAuth
from .httpd import HttpServer, Request, Response, Route, text, urlpath
from .reads import Reads, new_tag
from .sqlguard import QueryRefused

log = logging.getLogger("llmtap.admin")
MAX_SQL_BYTES = 1024 * 1024
CONTENT_TYPES = {
    "JSON": "application/json",
    "JSONEachRow": "application/x-ndjson",
    "CSV": "text/csv",
    "CSVWithNames": "text/csv",
}
STATIC_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/viewer.css": ("viewer.css", "text/css; charset=utf-8"),
}
STATIC_JS = viewer.STATIC / "js"  # the viewer's ES modules: /js/<name>.js and /js/pages/<name>.js
QUERY_ROUTES = frozenset({"/api/sql", "/api/panel", "/api/variable", *viewer_api.ROUTES})


class AdminState:
    def __init__(
        self,
        metrics: Metrics,
        reads: Reads | None,
        health: Callable[[], dict[str, Any]],
        auth: AdminAuth,
        grafana_url: str = "",
    ) -> None:
        self.metrics = metrics
        self.reads = reads
        self.health = health
        self.auth = auth
        self.grafana_url = grafana_url
        self.probe = viewer_api.StoreProbe(self._probe_query)

    def _probe_query(self, sql: str, fmt: str, params: dict[str, str]) -> bytes:
        if self.reads is None:
            raise viewer_api.Unreachable("this sidecar runs with --store none")
        return self.reads.run(sql, fmt, params)


def route(method: str, path: str) -> Route:
    if method == "POST" and path in QUERY_ROUTES:
        return Route(MAX_SQL_BYTES, heavy=True)
    if method == "POST" and path in ("/api/login", "/api/logout"):
        return Route(4096)
    return Route()


def _json(status: int, obj: Any) -> Response:
    return Response(status, json.dumps(obj, default=str).encode(), "application/json")


def _throttled() -> Response:
    resp = _json(429, {"error": "too many wrong tokens from this address: wait, then use the right one"})
    resp.headers.append(("Retry-After", "2"))
    return resp


def _is_json(req: Request) -> bool:
    return req.headers.get("content-type", "").split(";", 1)[0].strip().lower() == "application/json"


class Admin:
    """The request handler: checks, then the route."""

    def __init__(self, state: AdminState) -> None:
        self.state = state

    def __call__(self, req: Request) -> Response:
        path = urlpath(req.path)
        auth = self.state.auth
        presented = auth.bearer(req.headers, req.peer)
        bearer = presented == "ok"
        if path == "/healthz" and req.method == "GET":
            return self.healthz(bearer or auth.host_ok(req.headers))
        if presented == "throttled":
            return _throttled()
        if not bearer and not auth.host_ok(req.headers):
            return text(421, "unknown Host: use a loopback address, an IP, or --admin-allowed-host NAME")
        api = path.startswith("/api/") or path == "/metrics" or req.method == "POST"
        if api and not auth.same_origin(req.headers):
            return text(403, "cross-origin requests are refused")
        if req.method == "GET":
            return self.get(req, path, bearer)
        if path == "/api/login":
            return self.login(req)
        if path == "/api/logout":
            auth.logout(req.headers)  # the session ends here, not only in this browser
            return Response(204, headers=[("Set-Cookie", f"{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")])
        if path not in QUERY_ROUTES:
            return text(404, "not found")
        if not _is_json(req):
            return text(415, "POST a JSON body (Content-Type: application/json)")
        if not (bearer or auth.cookie_ok(req.headers)):
            return _json(401, {"error": "missing or wrong admin token"})
        if self.state.reads is None:
            return text(503, "this sidecar runs with --store none: query the store the collector writes to")
        try:
            body = json.loads(req.body or b"{}")
        except ValueError:
            return text(400, 'expected {"query": "...", "format": "..."}')
        if not isinstance(body, dict):
            return text(400, "expected a JSON object")
        if path == "/api/sql":
            return self.sql(req, body)
        if path in viewer_api.ROUTES:
            return self.viewer_api(req, path, body)
        return self.viewer(req, path, body)

    def get(self, req: Request, path: str, bearer: bool) -> Response:
        auth = self.state.auth
        if path == "/metrics":
            if auth.explicit and not (bearer or auth.cookie_ok(req.headers)):
                return text(401, "missing or wrong bearer token")
            return Response(200, self.state.metrics.exposition(), METRICS_CONTENT_TYPE)
        if path in STATIC_FILES:
            name, ctype = STATIC_FILES[path]
            return Response(200, (viewer.STATIC / name).read_bytes(), ctype)
        if path.startswith("/js/") and (js := _module(path)) is not None:
            return Response(200, js.read_bytes(), "text/javascript; charset=utf-8")
        if path == "/api/status":  # like /healthz: whether the store answers, nothing from it
            return _json(200, {"store": self.state.probe.status()})
        if path == "/api/session":
            return _json(200, {"authenticated": bearer or auth.cookie_ok(req.headers)})
        if path == "/api/dashboards":
            boards = viewer.load_dashboards()
            return _json(200, [{"uid": b["uid"], "title": b["title"]} for b in boards.values()])
        if path.startswith("/api/dashboards/"):
            board = viewer.load_dashboards().get(path.rsplit("/", 1)[1])
            return text(404, "no such dashboard") if board is None else _json(200, board)
        return text(404, "not found")

    def healthz(self, trusted: bool) -> Response:
        """The sidecar's health; to a request that fails the Host check (a page behind DNS rebinding), only
        its status: the rest names internals (the store's host in ``store_error``)."""
        h = self.state.health()
        code = 200 if h.get("status") == "ok" else 503
        return _json(code, h if trusted else {"status": h.get("status")})

    def login(self, req: Request) -> Response:
        if not _is_json(req):
            return text(415, "POST a JSON body (Content-Type: application/json)")
        try:
            token = json.loads(req.body or b"{}").get("token", "")
        except (ValueError, AttributeError):
            token = ""
        verdict = self.state.auth.login(token, req.peer) if isinstance(token, str) else "wrong"
        if verdict == "throttled":
            return _throttled()
        if verdict != "ok":
            return _json(401, {"error": "wrong token (see <data-dir>/admin-token)"})
        return Response(204, headers=[("Set-Cookie", self.state.auth.session_cookie())])

    def _cancellable(self, req: Request) -> str:
        reads = self.state.reads
        tag = new_tag()
        if reads is not None:
            req.set_cancel(lambda: reads.cancel(tag))
        return tag

    def sql(self, req: Request, body: dict[str, Any]) -> Response:
        assert self.state.reads is not None
        fmt = body.get("format") or parse_qs(urlsplit(req.path).query).get("format", ["JSONEachRow"])[0]
        query = body.get("query")
        if not isinstance(query, str):
            return text(400, 'expected {"query": "...", "format": "..."}')
        try:
            out = self.state.reads.run(query, fmt, body.get("params"), self._cancellable(req))
        except QueryRefused as e:
            return text(403, f"refused: {e}")
        except Exception as e:
            if viewer_api.unreachable(e):  # the store (or its engine process) is away: not the query's fault
                return text(503, f"store unreachable: {viewer_api.short(e)}")
            return text(400, f"query failed: {_first_line(e)}")
        return Response(200, out, CONTENT_TYPES.get(fmt, "text/plain; charset=utf-8"))

    def viewer(self, req: Request, path: str, body: dict[str, Any]) -> Response:
        reads = self.state.reads
        assert reads is not None
        tag = self._cancellable(req)

        def query(sql: str, fmt: str, params: dict[str, str]) -> bytes:
            return reads.run(sql, fmt, params, tag)

        try:
            boards = viewer.load_dashboards()
            if path == "/api/panel":
                out: Any = viewer.panel_data(query, boards, body)
            else:
                out = viewer.variable_values(query, boards, body)
        except (ValueError, QueryRefused) as e:
            return _json(400, {"error": str(e)})
        except Exception as e:
            if viewer_api.unreachable(e):
                return _json(503, {"error": f"store unreachable: {viewer_api.short(e)}", "store_unreachable": True})
            return _json(500, {"error": f"query failed: {_first_line(e)}"[:2000]})
        return _json(200, out)

    def viewer_api(self, req: Request, path: str, body: dict[str, Any]) -> Response:
        """The explain analyses, a call, a session (:mod:`.viewer_api`): ids and choices in, never SQL."""
        reads = self.state.reads
        assert reads is not None
        tag = self._cancellable(req)

        def query(sql: str, fmt: str, params: dict[str, str]) -> bytes:
            return reads.run(sql, fmt, params, tag)

        status, out = viewer_api.handle(path, query, body, self.state.grafana_url)
        return _json(status, out)


def _module(path: str) -> Path | None:
    """A file of the viewer's modules, by its URL path; nothing outside ``static/js``."""
    rel = path.removeprefix("/js/")
    if not rel.endswith(".js") or ".." in rel or rel.startswith("/") or "\\" in rel:
        return None
    f = (STATIC_JS / rel).resolve()
    return f if f.is_file() and STATIC_JS.resolve() in f.parents else None


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return (s.splitlines()[0] if s else type(e).__name__)[:2000]


class AdminServer:
    def __init__(self, host: str, port: int, state: AdminState) -> None:
        self.state = state
        self.http = HttpServer(host, port, route, Admin(state), SECURITY_HEADERS)
        self.address = self.http.address

    def start(self) -> None:
        self.http.start()

    def close(self) -> None:
        self.http.close()
