"""The mitmproxy addon: thin glue between flows and :mod:`llmtap.capture`.

Hooks only copy plain values out of the flow and enqueue; nothing here blocks.
Hosts that are not LLM providers never get here over HTTPS (mitmproxy tunnels
them, see ``allow_hosts``); plain-HTTP ones are streamed through untouched.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from dataclasses import dataclass, field

from mitmproxy import http

from . import faults
from .adapters import GENERIC_API
from .attribution import ATTRIBUTION_HEADERS, Fingerprinter, read_attribution
from .capture import Capture, End, RequestFacts
from .pipeline import Pipeline
from .providers import (
    adapter_for,
    allow_host_patterns,
    api_for_request,
    base_url_target,
    model_from_path,
    provider_for_call,
    provider_for_host,
)

log = logging.getLogger("llmtap.addon")
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
_KEY = "llmtap"
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def _sigv4_signed_headers(authorization: str) -> frozenset[str]:
    """Header names an AWS SigV4 signature covers (``SignedHeaders=a;b;c``)."""
    if not authorization.startswith("AWS4-HMAC-SHA256"):
        return frozenset()
    m = re.search(r"SignedHeaders=([^,\s]+)", authorization)
    return frozenset(m.group(1).lower().split(";")) if m else frozenset()


@dataclass
class AddonConfig:
    service: str = ""
    intercept: list[str] = field(default_factory=list)
    listen: tuple[str, int] = ("127.0.0.1", 8080)


class LlmTapAddon:
    def __init__(self, cfg: AddonConfig, pipeline: Pipeline, fingerprinter: Fingerprinter) -> None:
        self.cfg = cfg
        self.pipeline = pipeline
        self.fp = fingerprinter
        self._intercepted = [re.compile(p, re.IGNORECASE) for p in allow_host_patterns(cfg.intercept)]
        self.running_since: float | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.inflight = 0  # calls captured and not finished: returns to 0 when nothing leaks

    # -- lifecycle -----------------------------------------------------------------
    def running(self) -> None:
        self.running_since = time.time()
        self.loop = asyncio.get_running_loop()

    # -- HTTP ----------------------------------------------------------------------
    def _addressed_to_us(self, host: str, port: int) -> bool:
        """A plain-HTTP request for the sidecar itself (base-URL mode), not one it should proxy."""
        lh, lp = self.cfg.listen
        return port == lp and (host == lh or host in _LOOPBACK_NAMES or lh in ("0.0.0.0", "::"))

    def is_intercepted(self, host: str, port: int) -> bool:
        hp = f"{host}:{port}"
        return any(rx.match(hp) for rx in self._intercepted)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        flow.metadata["llmtap_t0"] = (time.time(), time.monotonic())
        req = flow.request
        if req.scheme == "http" and self._addressed_to_us(req.host, req.port):
            target = base_url_target(req.path, self.cfg.intercept)
            if target is None:
                flow.response = http.Response.make(
                    404,
                    b"llmtap: no such base-URL route; use /openai/..., /anthropic/..., /gemini/..., "
                    b"/azure/<resource>/..., /openrouter/..., /groq/..., /deepseek/..., /mistral/..., /xai/..., "
                    b"or /upstream/<--intercept host>/...\n",
                    {"content-type": "text/plain"},
                )
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
        t0 = flow.metadata.get("llmtap_t0") or (time.time(), time.monotonic())
        headers = [(k.lower(), v) for k, v in req.headers.items(multi=True)]
        signed = _sigv4_signed_headers(req.headers.get("authorization", ""))
        for name in ATTRIBUTION_HEADERS:
            if name in req.headers and name not in signed:  # removing a signed header would void the signature
                del req.headers[name]
        names = {k for k, _ in headers}
        api = api_for_request(req.method, req.path, provider_for_host(req.host), names)
        if api is None:
            if req.method != "POST":
                return  # GET /v1/models and the like: not calls
            api = GENERIC_API  # an API llmtap has no adapter for: still recorded from the transport
        try:
            body = req.get_content(strict=False) or b""
        except Exception:
            body = req.raw_content or b""
        trace_id, parent = secrets.token_hex(16), ""
        tp = req.headers.get("traceparent", "")
        m = _TRACEPARENT.match(tp.strip().lower()) if tp else None
        if m and m.group(1) != "0" * 32:
            trace_id, parent = m.group(1), m.group(2)
        facts = RequestFacts(
            method=req.method,
            host=req.host,
            port=req.port,
            path=req.path,
            headers=headers,
            body=body,
            start_wall=t0[0],
            start_mono=t0[1],
            provider=provider_for_call(req.host, api),
            api=api,
            service=self.cfg.service or "unknown_service",
            attribution=read_attribution(headers),
            api_key_id=self.fp.api_key_id(headers, req.path.partition("?")[2]),
            trace_id=trace_id,
            span_id=secrets.token_hex(8),
            parent_span_id=parent,
        )
        cap = Capture(facts, faults.maybe_break(adapter_for(api)), self._parse_error)
        if not cap.adapter.req.model:  # Gemini, Azure deployments and Bedrock name the model in the path
            cap.adapter.req.model = model_from_path(req.path)
        flow.metadata[_KEY] = cap
        self.inflight += 1

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        resp = flow.response
        if resp is None:
            return
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
            self.inflight -= 1
            self.pipeline.submit(cap, End("complete", time.monotonic()))

    def error(self, flow: http.HTTPFlow) -> None:
        cap: Capture | None = flow.metadata.pop(_KEY, None)
        if cap is None:
            return
        self.inflight -= 1
        msg = flow.error.msg if flow.error else ""
        low = msg.lower()
        kind = "client_disconnected" if ("client disconnected" in low or "by client" in low) else "upstream_error"
        self.pipeline.submit(cap, End(kind, time.monotonic(), msg))

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
