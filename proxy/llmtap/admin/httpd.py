"""A small HTTP/1.1 server for the admin API: one event loop thread, bounded workers, hard limits.

Connections are read on an asyncio loop of their own (never the proxy's), so an idle or slow
client costs a socket, not a thread: at most :data:`MAX_CONNECTIONS` at once (the oldest still
sending its request is dropped for a new one), the request head must arrive within
:data:`HEAD_TIMEOUT` and be at most :data:`MAX_HEAD` bytes, a body needs a plain decimal
``Content-Length`` within the route's cap and must arrive within :data:`BODY_TIMEOUT`
(``Transfer-Encoding`` is refused). A complete request goes to a bounded thread pool: light
routes (health, metrics, static files) and queries have separate pools, so busy queries never
starve ``/healthz``. While a query waits or runs, the connection is watched: a client that goes
away has its query cancelled — one still queued for a worker never starts, one that has started
is told through :meth:`Request.set_cancel` (whenever the handler sets it). One response per
connection (``Connection: close``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import loopnoise

log = logging.getLogger("llmtap.admin")

MAX_CONNECTIONS = 256
MAX_HEAD = 16 * 1024
HEAD_TIMEOUT = 10.0
BODY_TIMEOUT = 30.0
WRITE_TIMEOUT = 60.0
LIGHT_WORKERS = 4
QUERY_WORKERS = 4
_LENGTH_RE = re.compile(r"^[0-9]{1,12}$")
REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


@dataclass(eq=False)
class Request:
    method: str
    path: str  # the raw target: path and query
    headers: dict[str, str]  # names lower-cased; a repeated header keeps its last value
    body: bytes = b""
    peer: str = ""  # the client's address
    cancel: Callable[[], None] | None = None  # set by a handler whose work can be cancelled (set_cancel)
    gone: threading.Event = field(default_factory=threading.Event)  # the client went away

    def set_cancel(self, cancel: Callable[[], None]) -> None:
        """Called by a handler (its worker thread) before cancellable work; runs ``cancel`` at once when the
        client is already gone, so a client that leaves while its request waits for the work cancels it too."""
        self.cancel = cancel
        if self.gone.is_set():
            cancel()

    def client_gone(self) -> None:
        """Called by the server (the loop's executor) when the client went away."""
        self.gone.set()
        cancel = self.cancel
        if cancel is not None:
            cancel()


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


def text(status: int, msg: str) -> Response:
    return Response(status, (msg.rstrip("\n") + "\n").encode())


@dataclass(frozen=True)
class Route:
    """How the server treats a path before its handler runs."""

    max_body: int = 0  # bytes a POST may carry
    heavy: bool = False  # runs on the query pool and is cancelled when the client leaves


Router = Callable[[str, str], Route]  # (method, path) → its route
Handler = Callable[[Request], Response]
ExtraHeaders = tuple[tuple[str, str], ...]


class HttpServer:
    def __init__(self, host: str, port: int, router: Router, handler: Handler, headers: ExtraHeaders = ()) -> None:
        self.router = router
        self.handler = handler
        self.extra_headers = headers
        self.loop = asyncio.new_event_loop()
        loopnoise.install(self.loop)  # out of descriptors: one line per 10 s, not one traceback per accept
        self.light = concurrent.futures.ThreadPoolExecutor(LIGHT_WORKERS, thread_name_prefix="llmtap-admin")
        self.heavy = concurrent.futures.ThreadPoolExecutor(QUERY_WORKERS, thread_name_prefix="llmtap-admin-query")
        self._waiting: dict[asyncio.StreamWriter, float] = {}  # connections still sending their request
        self._open = 0
        self.refused = 0
        self._inflight: set[Request] = set()
        self._server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, host, port, limit=MAX_HEAD, backlog=512)
        )
        self.address = self._server.sockets[0].getsockname()[:2]
        self._thread = threading.Thread(target=self.loop.run_forever, name="llmtap-admin", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            for req in list(self._inflight):
                with contextlib.suppress(Exception):
                    req.client_gone()
            for w in list(self._waiting):
                w.close()

        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
        self.light.shutdown(wait=False, cancel_futures=True)
        self.heavy.shutdown(wait=False, cancel_futures=True)

    # -- one connection ------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open >= MAX_CONNECTIONS and not self._evict():
            self.refused += 1
            writer.close()
            return
        self._open += 1
        self._waiting[writer] = time.monotonic()
        try:
            resp = await self._respond(reader, writer)
            if resp is not None:
                await asyncio.wait_for(self._write(writer, resp), WRITE_TIMEOUT)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("admin: request failed")
        finally:
            self._waiting.pop(writer, None)
            self._open -= 1
            with contextlib.suppress(Exception):
                writer.close()

    def _evict(self) -> bool:
        """At the cap: drop the connection that has waited longest without sending a whole request."""
        if not self._waiting:
            return False
        oldest = min(self._waiting, key=self._waiting.__getitem__)
        self._waiting.pop(oldest, None)
        oldest.close()
        self.refused += 1
        return True

    async def _respond(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Response | None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except asyncio.LimitOverrunError:
            return text(431, "request head too large")
        except TimeoutError:
            return text(408, "request head not received in time")
        except asyncio.IncompleteReadError:
            return None
        req = self._parse_head(head)
        if isinstance(req, Response):
            return req
        peer = writer.get_extra_info("peername")
        req.peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        route = self.router(req.method, urlpath(req.path))
        if req.method == "POST":
            err = await self._read_body(reader, req, route)
            if err is not None:
                return err
        elif "transfer-encoding" in req.headers or req.headers.get("content-length", "0") != "0":
            return text(400, "this request takes no body")
        self._waiting.pop(writer, None)  # a whole request: no longer a candidate for eviction
        loop = asyncio.get_running_loop()
        if not route.heavy:
            return await loop.run_in_executor(self.light, self.handler, req)
        self._inflight.add(req)
        try:
            queued = self.heavy.submit(self.handler, req)
            work: asyncio.Future[Any] = asyncio.wrap_future(queued)
            gone: asyncio.Future[Any] = asyncio.ensure_future(_closed(reader))
            done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if work not in done:
                if queued.cancel():  # still waiting for a worker: it never starts
                    return None
                with contextlib.suppress(Exception):
                    await loop.run_in_executor(self.light, req.client_gone)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(work, 10)
                return None
            gone.cancel()
            return work.result()
        finally:
            self._inflight.discard(req)

    @staticmethod
    def _parse_head(head: bytes) -> Request | Response:
        try:
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
        except ValueError:
            return text(400, "malformed request line")
        if not version.startswith("HTTP/1."):
            return text(400, "HTTP/1.x only")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                return text(400, "malformed header")
            headers[name.lower()] = value.strip()
        if method not in ("GET", "POST"):
            return text(405, "method not allowed")
        return Request(method, target, headers)

    async def _read_body(self, reader: asyncio.StreamReader, req: Request, route: Route) -> Response | None:
        if "transfer-encoding" in req.headers:
            return text(501, "Transfer-Encoding is not supported: send Content-Length")
        raw = req.headers.get("content-length")
        if raw is None:
            return text(411, "Content-Length required")
        if not _LENGTH_RE.match(raw):
            return text(400, "invalid Content-Length")
        n = int(raw)
        if n > route.max_body:
            return text(413, f"body larger than {route.max_body} bytes")
        try:
            req.body = await asyncio.wait_for(reader.readexactly(n), BODY_TIMEOUT)
        except TimeoutError:
            return text(408, "request body not received in time")
        return None

    async def _write(self, writer: asyncio.StreamWriter, resp: Response) -> None:
        head = [f"HTTP/1.1 {resp.status} {REASONS.get(resp.status, 'Status')}"]
        head += [
            f"Content-Type: {resp.content_type}",
            f"Content-Length: {len(resp.body)}",
            "Cache-Control: no-store",
            "Connection: close",
        ]
        head += [f"{k}: {v}" for k, v in (*self.extra_headers, *resp.headers)]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + resp.body)
        await writer.drain()


async def _closed(reader: asyncio.StreamReader) -> None:
    """Returns when the client has closed its side (anything it sends meanwhile is ignored)."""
    while await reader.read(4096):
        pass


def urlpath(target: str) -> str:
    return target.split("?", 1)[0].split("#", 1)[0]
