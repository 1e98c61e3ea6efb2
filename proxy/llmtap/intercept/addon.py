"""The mitmproxy addon: thin glue between flows and :mod:`llmtap.capture`.

Hooks copy plain values out of the flow, ask the module that knows (routing, attribution,
the adapters' routes), and enqueue; nothing here blocks. Hosts that are not LLM providers
never get here over HTTPS (mitmproxy tunnels them, see ``allow_hosts``); plain-HTTP ones are
streamed through untouched, and so are the paths of a decrypted host that are not its API
(``chatgpt.com`` outside ``/backend-api/codex/``). WebSockets: :mod:`.websocket`.

The user part of the proxy URL (``HTTPS_PROXY=http://SERVICE:x@host:port``, sent as
``Proxy-Authorization`` on the CONNECT) names the ``service`` of every call on that client
connection. Without ``--proxy-auth`` the password is ignored; with it, mitmproxy's proxyauth
addon checks the credentials first (and strips the header), and its verdict is read here.

Self-overhead: the hooks a call goes through add the time they took (``perf_counter_ns``) to its
capture's ``loop_ns`` (see :mod:`llmtap.capture.tee`), the record's ``overhead_ms``.

Thread contract: every hook runs on the proxy's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from mitmproxy import connection, http
from mitmproxy.connection import ConnectionState

from ..adapters import Adapter, route
from ..capture import Capture, End, RequestFacts
from ..capture.request import LOOP_PARSE, RequestBody, parse_body
from ..pipeline import Pipeline
from ..providers import ProviderName, is_call_path
from ..record import Api, EndKind
from .attribution import Fingerprinter, proxy_user, read_attribution, strippable, trace_ids
from .routing import BASE_URL_HELP, Interception, base_url_target
from .websocket import WebSockets, is_upgrade

log = logging.getLogger("llmtap.addon")
_KEY = "llmtap"
_REQ = "llmtap_request"
_NS = "llmtap_loop_ns"  # hook time spent on a call before its capture exists
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})

AdapterFactory = Callable[[type[Adapter]], Adapter]


@dataclass
class AddonConfig:
    service: str = ""
    intercept: list[str] = field(default_factory=list)
    listen: tuple[str, int] = ("127.0.0.1", 8080)


class LlmTapAddon:
    def __init__(
        self,
        cfg: AddonConfig,
        pipeline: Pipeline,
        fingerprinter: Fingerprinter,
        make_adapter: AdapterFactory | None = None,
    ) -> None:
        self.cfg = cfg
        self.pipeline = pipeline
        self.fp = fingerprinter
        self.make_adapter: AdapterFactory = make_adapter or (lambda cls: cls())
        self.is_intercepted = Interception(cfg.intercept)
        self.running_since: float | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ws = WebSockets(self._facts, self.pipeline.submit, self._parse_error, self.make_adapter)
        # The service named by the proxy URL's user, per client connection (as proxyauth keeps its own).
        self._conn_service: weakref.WeakKeyDictionary[connection.Client, str] = weakref.WeakKeyDictionary()
        self._live: dict[str, http.HTTPFlow] = {}  # calls captured and not finished, by flow id
        self.draining = False  # set by the graceful shutdown (intercept/drain.py)

    @property
    def inflight(self) -> int:
        """Calls captured and not finished: returns to 0 when nothing leaks."""
        return len(self._live)

    # -- lifecycle -----------------------------------------------------------------
    def running(self) -> None:
        self.running_since = time.time()
        self.loop = asyncio.get_running_loop()

    # -- HTTP ----------------------------------------------------------------------
    def _addressed_to_us(self, host: str, port: int) -> bool:
        """A plain-HTTP request for the sidecar itself (base-URL mode), not one it should proxy."""
        lh, lp = self.cfg.listen
        return port == lp and (host == lh or host in _LOOPBACK_NAMES or lh in ("0.0.0.0", "::"))

    def http_connect(self, flow: http.HTTPFlow) -> None:
        """The CONNECT of a client connection: its proxy credentials name the service."""
        user = self._proxy_user(flow)
        if user:
            self._conn_service[flow.client_conn] = user

    def _proxy_user(self, flow: http.HTTPFlow) -> str:
        checked = flow.metadata.get("proxyauth")  # set by mitmproxy's proxyauth when --proxy-auth is on
        if isinstance(checked, tuple) and checked and isinstance(checked[0], str):
            return checked[0][:128]
        value = flow.request.headers.get("proxy-authorization", "")
        if value and flow.request.method != "CONNECT":
            del flow.request.headers["proxy-authorization"]  # meant for the proxy: never forwarded
        return proxy_user(value)[0] if value else ""

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        t0 = perf_counter_ns()
        self._requestheaders(flow)
        if _REQ in flow.metadata:  # a call: its capture is built at the end of the request
            flow.metadata[_NS] = perf_counter_ns() - t0

    def _requestheaders(self, flow: http.HTTPFlow) -> None:
        flow.metadata["llmtap_t0"] = (time.time(), time.monotonic())
        answered = flow.response is not None  # already (proxy authentication): nothing to stream
        req = flow.request
        if flow.client_conn not in self._conn_service:  # plain-HTTP proxying: credentials on each request
            user = self._proxy_user(flow)
            if user:
                flow.metadata["llmtap_service"] = user
        if req.scheme == "http" and self._addressed_to_us(req.host, req.port):
            target = base_url_target(req.path, self.cfg.intercept)
            if target is None:
                flow.response = http.Response.make(404, BASE_URL_HELP, {"content-type": "text/plain"})
                return
            # Base-URL mode: forward over TLS to the real provider (no CA needed on the client).
            host, port, path = target
            req.scheme, req.host, req.port, req.path = "https", host, port, path
            req.headers["host"] = host if port == 443 else f"{host}:{port}"
        if not self.is_intercepted(req.host, req.port) or not is_call_path(req.host, req.path):
            if not answered:
                req.stream = True  # not ours (or not the host's API): pass through, never buffer
            return
        # A call: its headers are read (then stripped) now, its body streamed upstream as it arrives,
        # counted and kept up to a bound (capture.request); the capture is built at its end.
        headers = [(k.lower(), v) for k, v in req.headers.items(multi=True)]
        names = frozenset(k for k, _ in headers)
        for name in strippable(names, req.headers.get("authorization", "")):
            del req.headers[name]
        if is_upgrade(flow):
            flow.metadata[_REQ] = (headers, None)
            return
        match = route(req.method, req.host, req.path, names)
        if answered:
            return
        if match is None:
            req.stream = True  # GET /v1/models and the like: not calls
            return
        flow.metadata[_REQ] = (headers, match)
        req.stream = RequestBody()

    def request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        """Builds the capture; a large or compressed body is parsed off the loop first (then the hook
        returns the awaitable mitmproxy waits for before it lets the request finish)."""
        t0 = perf_counter_ns()
        pending = self._request(flow)
        spent = perf_counter_ns() - t0
        cap: Capture | None = flow.metadata.get(_KEY)
        if cap is not None:
            cap.loop_ns += spent
        elif pending is not None:  # counted once the capture exists
            flow.metadata[_NS] = flow.metadata.get(_NS, 0) + spent
        return pending

    def _request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        seen = flow.metadata.pop(_REQ, None)
        if seen is None:
            return None
        headers, match = seen
        req = flow.request
        if match is None:  # a WebSocket upgrade
            self._keep(flow, self.ws.upgrade_request(flow, headers))
            return None
        body = req.stream if isinstance(req.stream, RequestBody) else RequestBody()
        if body.size == 0 and req.raw_content:  # a body mitmproxy consumed whole (not streamed)
            body(req.raw_content)
        encoding = req.headers.get("content-encoding", "")
        raw, body.buf = body.buf, None
        if raw is not None and (len(raw) > LOOP_PARSE or encoding):
            return self._parse_then_capture(flow, headers, match, body, raw, encoding)
        self._capture(flow, headers, match, body, *parse_body(raw, encoding))
        return None

    async def _parse_then_capture(
        self, flow: http.HTTPFlow, headers: list[tuple[str, str]], match: Any, body: RequestBody,
        raw: bytearray, encoding: str,
    ) -> None:  # fmt: skip
        loop = asyncio.get_running_loop()
        request_json, note = await loop.run_in_executor(None, parse_body, raw, encoding)
        t0 = perf_counter_ns()
        self._capture(flow, headers, match, body, request_json, note)
        cap: Capture | None = flow.metadata.get(_KEY)
        if cap is not None:
            cap.loop_ns += perf_counter_ns() - t0

    def _capture(
        self, flow: http.HTTPFlow, headers: list[tuple[str, str]], match: Any, body: RequestBody,
        request_json: Any, note: str,
    ) -> None:  # fmt: skip
        facts = self._facts(flow, headers, b"", match.provider, match.api)
        facts.body_size, facts.body_hash, facts.body_note = body.size, body.digest(), note
        cap = Capture(facts, self.make_adapter(match.adapter), self._parse_error, request=request_json, parsed=True)
        if not cap.adapter.req.model:  # Gemini, Azure deployments and Bedrock name the model in the path
            cap.adapter.req.model = match.model
        self._keep(flow, cap)

    def _keep(self, flow: http.HTTPFlow, cap: Capture | None) -> None:
        if cap is not None:
            cap.loop_ns += flow.metadata.pop(_NS, 0)
            flow.metadata[_KEY] = cap
            self._live[flow.id] = flow

    def _facts(
        self, flow: http.HTTPFlow, headers: list[tuple[str, str]], body: bytes, provider: ProviderName, api: Api
    ) -> RequestFacts:
        req = flow.request
        t0 = flow.metadata.get("llmtap_t0") or (time.time(), time.monotonic())
        trace_id, parent = trace_ids(req.headers.get("traceparent", ""))
        service = self._conn_service.get(flow.client_conn) or flow.metadata.get("llmtap_service")
        return RequestFacts(
            method=req.method,
            host=req.host,
            port=req.port,
            path=req.path,
            headers=headers,
            body=body,
            start_wall=t0[0],
            start_mono=t0[1],
            provider=provider,
            api=api,
            service=service or self.cfg.service or "unknown_service",
            attribution=read_attribution(headers),
            api_key_id=self.fp.api_key_id(headers, req.path.partition("?")[2]),
            trace_id=trace_id,
            span_id=secrets.token_hex(8),
            parent_span_id=parent,
            connection_id=flow.client_conn.id,
        )

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        t0 = perf_counter_ns()
        resp = flow.response
        if resp is None:
            return
        if self.draining and resp.http_version.startswith("HTTP/1"):
            resp.headers["connection"] = "close"  # this connection's next call goes to a sidecar that stays
        cap: Capture | None = flow.metadata.get(_KEY)
        if cap is not None and resp.status_code == 101:  # a WebSocket opened: its calls are its messages
            flow.metadata.pop(_KEY)
            self._live.pop(flow.id, None)
            cap = None
        if cap is None:
            resp.stream = True
            return
        cap.on_response_headers(
            resp.status_code, [(k.lower(), v) for k, v in resp.headers.items(multi=True)], time.monotonic()
        )
        resp.stream = cap.tee
        cap.loop_ns += perf_counter_ns() - t0

    def response(self, flow: http.HTTPFlow) -> None:
        t0 = perf_counter_ns()
        cap: Capture | None = flow.metadata.pop(_KEY, None)
        if cap is not None:
            self._live.pop(flow.id, None)
            end = End("complete", time.monotonic())
            cap.loop_ns += perf_counter_ns() - t0  # before the hand-over: the worker reads it
            self.pipeline.submit(cap, end)

    # -- WebSocket (see .websocket) -------------------------------------------------------------
    def websocket_start(self, flow: http.HTTPFlow) -> None:
        self.ws.start(flow)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        self.ws.message(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        self.ws.end(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        t0 = perf_counter_ns()
        if flow.websocket is not None:
            self.ws.end(flow, flow.error.msg if flow.error else "")
        cap: Capture | None = flow.metadata.pop(_KEY, None)
        if cap is None:
            return
        self._live.pop(flow.id, None)
        msg = flow.error.msg if flow.error else ""
        kind: EndKind = "client_disconnected" if client_went_away(flow, msg) else "upstream_error"
        end = End(kind, time.monotonic(), msg)
        cap.loop_ns += perf_counter_ns() - t0
        self.pipeline.submit(cap, end)

    def cut_inflight(self) -> int:
        """End of the drain: every call still running is recorded as cut by the shutdown."""
        now = time.monotonic()
        flows = list(self._live.values())
        self._live.clear()
        for flow in flows:
            cap: Capture | None = flow.metadata.pop(_KEY, None)
            if cap is not None:
                self.pipeline.submit(cap, End("sidecar_shutdown", now, "the sidecar shut down before the call ended"))
        return len(flows)

    def loop_tasks(self, timeout: float = 2.0) -> int | None:
        """Tasks alive on the proxy's event loop (from another thread), for leak checks."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return None

        async def count() -> int:
            return len(asyncio.all_tasks())

        try:
            return asyncio.run_coroutine_threadsafe(count(), loop).result(timeout)
        except Exception:
            return None

    def _parse_error(self, api: str, e: BaseException) -> None:
        self.pipeline.metrics.parse_errors.labels(api).inc()
        log.warning("side parser failed for a %s call (traffic unaffected): %s", api, e)


def client_went_away(flow: http.HTTPFlow, msg: str) -> bool:
    """Whether a flow's error is the client leaving rather than the upstream failing.

    HTTP/1: mitmproxy says "Client disconnected."; an HTTP/2 stream reset: "stream reset by
    client (CANCEL)". But an HTTP/2 client that closes its connection (as httpx does with a
    stream it stopped reading) or sends GOAWAY ends its streams with "peer closed connection" /
    "HTTP/2 connection closed: ...", the same words as an upstream that does so: the side is
    told by the client connection's state (no longer readable once the client has closed it).
    """
    low = msg.lower()
    if "client disconnected" in low or "by client" in low:
        return True
    return not (flow.client_conn.state & ConnectionState.CAN_READ)
