"""The mitmproxy addon: thin glue between flows and :mod:`llmtap.capture`.

Hooks copy plain values out of the flow, ask the module that knows (routing, attribution,
the adapters' routes), and enqueue; nothing here blocks. Hosts that are not LLM providers
never get here over HTTPS (mitmproxy tunnels them, see ``allow_hosts``); plain-HTTP ones are
streamed through untouched.

Thread contract: every hook runs on the proxy's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mitmproxy import http
from mitmproxy.connection import ConnectionState

from ..adapters import Adapter, route
from ..capture import Capture, End, RequestFacts
from ..pipeline import Pipeline
from ..record import EndKind
from .attribution import Fingerprinter, read_attribution, strippable, trace_ids
from .routing import BASE_URL_HELP, Interception, base_url_target

log = logging.getLogger("llmtap.addon")
_KEY = "llmtap"
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

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        flow.metadata["llmtap_t0"] = (time.time(), time.monotonic())
        req = flow.request
        if req.scheme == "http" and self._addressed_to_us(req.host, req.port):
            target = base_url_target(req.path, self.cfg.intercept)
            if target is None:
                flow.response = http.Response.make(404, BASE_URL_HELP, {"content-type": "text/plain"})
                return
            # Base-URL mode: forward over TLS to the real provider (no CA needed on the client).
            host, port, path = target
            req.scheme, req.host, req.port, req.path = "https", host, port, path
            req.headers["host"] = host if port == 443 else f"{host}:{port}"
        if not self.is_intercepted(req.host, req.port):
            req.stream = True  # not ours: pass through, never buffer

    def request(self, flow: http.HTTPFlow) -> None:
        req = flow.request
        if req.stream:
            return
        headers = [(k.lower(), v) for k, v in req.headers.items(multi=True)]
        names = frozenset(k for k, _ in headers)
        for name in strippable(names, req.headers.get("authorization", "")):
            del req.headers[name]
        match = route(req.method, req.host, req.path, names)
        if match is None:
            return  # GET /v1/models and the like: not calls
        t0 = flow.metadata.get("llmtap_t0") or (time.time(), time.monotonic())
        try:
            body = req.get_content(strict=False) or b""
        except Exception:
            body = req.raw_content or b""
        trace_id, parent = trace_ids(req.headers.get("traceparent", ""))
        facts = RequestFacts(
            method=req.method,
            host=req.host,
            port=req.port,
            path=req.path,
            headers=headers,
            body=body,
            start_wall=t0[0],
            start_mono=t0[1],
            provider=match.provider,
            api=match.api,
            service=self.cfg.service or "unknown_service",
            attribution=read_attribution(headers),
            api_key_id=self.fp.api_key_id(headers, req.path.partition("?")[2]),
            trace_id=trace_id,
            span_id=secrets.token_hex(8),
            parent_span_id=parent,
        )
        cap = Capture(facts, self.make_adapter(match.adapter), self._parse_error)
        if not cap.adapter.req.model:  # Gemini, Azure deployments and Bedrock name the model in the path
            cap.adapter.req.model = match.model
        flow.metadata[_KEY] = cap
        self._live[flow.id] = flow

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        resp = flow.response
        if resp is None:
            return
        if self.draining and resp.http_version.startswith("HTTP/1"):
            resp.headers["connection"] = "close"  # this connection's next call goes to a sidecar that stays
        cap: Capture | None = flow.metadata.get(_KEY)
        if cap is None:
            resp.stream = True
            return
        cap.on_response_headers(
            resp.status_code, [(k.lower(), v) for k, v in resp.headers.items(multi=True)], time.monotonic()
        )
        resp.stream = cap.tee

    def response(self, flow: http.HTTPFlow) -> None:
        cap: Capture | None = flow.metadata.pop(_KEY, None)
        if cap is not None:
            self._live.pop(flow.id, None)
            self.pipeline.submit(cap, End("complete", time.monotonic()))

    def error(self, flow: http.HTTPFlow) -> None:
        cap: Capture | None = flow.metadata.pop(_KEY, None)
        if cap is None:
            return
        self._live.pop(flow.id, None)
        msg = flow.error.msg if flow.error else ""
        kind: EndKind = "client_disconnected" if client_went_away(flow, msg) else "upstream_error"
        self.pipeline.submit(cap, End(kind, time.monotonic(), msg))

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
