"""The mitmproxy addon: thin glue between flows and the recorder's :mod:`llmtap.handoff` messages.

Hooks copy plain values out of the flow, ask the module that knows (routing, attribution, the
adapters' routes), and hand the facts off; nothing here parses, blocks or waits. Hosts that are
not LLM providers never get here over HTTPS (mitmproxy tunnels them, see ``allow_hosts``);
plain-HTTP ones are streamed through untouched, and so are the paths of a decrypted host that are
not its API (``chatgpt.com`` outside ``/backend-api/codex/``). WebSockets: :mod:`.websocket`.

A captured call's state is one :class:`~.calls.CallState` under ``flow.metadata[KEY]``. Its request
is handed off when the body has ended; its response's status and headers at once; its chunks as they
accumulate (:mod:`.calls`); its end in the ``response`` or ``error`` hook.

The user part of the proxy URL (``HTTPS_PROXY=http://SERVICE:x@host:port``, sent as
``Proxy-Authorization`` on the CONNECT) names the ``service`` of every call on that client
connection. Without ``--proxy-auth`` the password is ignored; with it, mitmproxy's proxyauth
addon checks the credentials first (and strips the header), and its verdict is read here.

Thread contract: every hook runs on the proxy's event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import weakref
from dataclasses import dataclass, field

from mitmproxy import connection, http
from mitmproxy.connection import ConnectionState

from .. import handoff
from ..adapters import route, route_ws
from ..providers import is_call_path
from ..record import EndKind
from .attribution import proxy_user, strippable
from .calls import KEY, CallState, Put, counted
from .routing import BASE_URL_HELP, Interception, base_url_target, call_host
from .websocket import WebSockets, is_upgrade

_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass
class AddonConfig:
    intercept: list[str] = field(default_factory=list)
    listen: tuple[str, int] = ("127.0.0.1", 8080)


class LlmTapAddon:
    def __init__(self, cfg: AddonConfig, put: Put) -> None:
        self.cfg = cfg
        self.put = put
        self.is_intercepted = Interception(cfg.intercept)
        self.running_since: float | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ws = WebSockets(put)
        self._ids = itertools.count(1)
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

    @counted
    def requestheaders(self, flow: http.HTTPFlow) -> CallState | None:
        state = self._requestheaders(flow)
        if state is not None:
            flow.metadata[KEY] = state
        return state

    def _requestheaders(self, flow: http.HTTPFlow) -> CallState | None:
        start_wall, start_mono = time.time(), time.monotonic()
        answered = flow.response is not None  # already (proxy authentication): nothing to stream
        req = flow.request
        user = self._conn_service.get(flow.client_conn, "")
        if not user and flow.client_conn not in self._conn_service:  # plain-HTTP proxying: credentials each time
            user = self._proxy_user(flow)
        if req.scheme == "http" and self._addressed_to_us(req.host, req.port):
            target = base_url_target(req.path, self.cfg.intercept)
            if target is None:
                flow.response = http.Response.make(404, BASE_URL_HELP, {"content-type": "text/plain"})
                return None
            # Base-URL mode: forward over TLS to the real provider (no CA needed on the client).
            host, port, path = target
            req.scheme, req.host, req.port, req.path = "https", host, port, path
            req.headers["host"] = host if port == 443 else f"{host}:{port}"
        host = call_host(flow.client_conn.proxy_mode.type_name, req.host, flow.client_conn.sni, req.host_header)
        if not self.is_intercepted(host, req.port) or not is_call_path(host, req.path):
            if not answered:
                req.stream = True  # not ours (or not the host's API): pass through, never buffer
            return None
        # A call: its headers are read (then stripped) now, its body streamed upstream as it arrives
        # and kept (calls.RequestTee); the facts are handed off at the end of the request.
        headers = [(k.lower(), v) for k, v in req.headers.items(multi=True)]
        names = frozenset(k for k, _ in headers)
        for name in strippable(names, req.headers.get("authorization", "")):
            del req.headers[name]
        if is_upgrade(flow):
            ws = route_ws(host, req.path, names)
            if ws is None:
                return None
            return CallState(next(self._ids), start_wall, start_mono, headers, ws.provider, ws.adapter.__name__,
                             ws.model, user, websocket=True, host=host)  # fmt: skip
        match = route(req.method, host, req.path, names)
        if answered:
            return None
        if match is None:
            req.stream = True  # GET /v1/models and the like: not calls
            return None
        state = CallState(next(self._ids), start_wall, start_mono, headers, match.provider, match.adapter.__name__,
                          match.model, user, host=host)  # fmt: skip
        req.stream = state.request_tee(self.put)
        return state

    @counted
    def request(self, flow: http.HTTPFlow) -> CallState | None:
        """The request has ended: its facts and body go to the recorder."""
        state: CallState | None = flow.metadata.get(KEY)
        if state is None or state.sent:
            return None
        req = flow.request
        if state.body_size == 0 and req.raw_content:  # a body mitmproxy consumed whole (not streamed)
            state.take_body(req.raw_content, self.put)
        state.sent = True
        self._live[flow.id] = flow
        body, digest, over = state.request_body()
        self.put(
            handoff.Request(
                state.call, state.start_wall, state.start_mono, req.method, state.host or req.host, req.port, req.path,
                state.headers, body, state.body_size, digest, over, state.provider, state.adapter, state.model,
                state.proxy_user, flow.client_conn.id, state.websocket, state.take_loop_ns(),
            )
        )  # fmt: skip
        return state

    @counted
    def responseheaders(self, flow: http.HTTPFlow) -> CallState | None:
        resp = flow.response
        if resp is None:
            return None
        if self.draining and resp.http_version.startswith("HTTP/1"):
            resp.headers["connection"] = "close"  # this connection's next call goes to a sidecar that stays
        state: CallState | None = flow.metadata.get(KEY)
        if state is None or not state.sent:
            resp.stream = True
            return None
        if state.websocket and resp.status_code == 101:  # a WebSocket opened: its calls are its messages
            self._live.pop(flow.id, None)
            resp.stream = True
            return None
        headers = [(k.lower(), v) for k, v in resp.headers.items(multi=True)]
        self.put(handoff.Response(state.call, resp.status_code, headers, time.monotonic()))
        resp.stream = state.response_tee(self.put)
        return state

    @counted
    def response(self, flow: http.HTTPFlow) -> CallState | None:
        state: CallState | None = flow.metadata.get(KEY)
        if state is None or not state.sent or flow.id not in self._live:
            return None  # not a call, or a WebSocket (its socket ends it)
        del flow.metadata[KEY]
        self._live.pop(flow.id, None)
        state.ending = ("complete", "")
        return state

    # -- WebSocket (see .websocket) -------------------------------------------------------------
    def websocket_start(self, flow: http.HTTPFlow) -> None:
        self.ws.start(flow)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        self.ws.message(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        self.ws.end(flow)

    @counted
    def error(self, flow: http.HTTPFlow) -> CallState | None:
        if flow.websocket is not None:
            self.ws.end(flow, flow.error.msg if flow.error else "")
        state: CallState | None = flow.metadata.get(KEY)
        if state is not None and not state.sent and state.parts:  # an upload cut before its end: not a call, but
            del flow.metadata[KEY]  # the recorder holds its parts until it hears of it
            state.ending = ("client_disconnected", "")
            return state
        if state is None or flow.id not in self._live:
            return None
        del flow.metadata[KEY]
        self._live.pop(flow.id, None)
        msg = flow.error.msg if flow.error else ""
        kind: EndKind = "client_disconnected" if client_went_away(flow, msg) else "upstream_error"
        state.ending = (kind, msg)
        return state

    def cut_inflight(self) -> int:
        """End of the drain: every call still running is recorded as cut by the shutdown."""
        flows = list(self._live.values())
        self._live.clear()
        for flow in flows:
            state: CallState | None = flow.metadata.pop(KEY, None)
            if state is not None:
                state.ending = ("sidecar_shutdown", "the sidecar shut down before the call ended")
                state.end(self.put)
        return len(flows)


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
