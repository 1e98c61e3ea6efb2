"""Per-call capture on the event loop: request facts in, a tee for response chunks.

This module knows nothing about mitmproxy. The addon hands it plain values; the tee
(:meth:`Capture.tee`) is the ``flow.response.stream`` callable and must never raise or
change the bytes. It holds one content decoder and one framer, chosen when the response
headers arrive, and hands each frame to the adapter hook the framing names. Everything
expensive (whole JSON bodies, estimation, percentiles) happens later, on the worker
(:mod:`.build`).

Thread contract: every method here runs on the proxy's event loop and must stay cheap;
:meth:`Capture.finish` runs on the worker, after the event loop is done with the call.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..adapters import Adapter
from ..decode import Framer, Framing, JSONBody, make_decoder
from ..decode.compression import ContentDecoder
from ..record import EndKind, Transport

log = logging.getLogger("llmtap.capture")

MAX_ERROR_BODY = 1024 * 1024


@dataclass(slots=True)
class RequestFacts:
    method: str
    host: str
    port: int
    path: str
    headers: list[tuple[str, str]]  # names lower-cased, as received (attribution included)
    body: bytes
    start_wall: float
    start_mono: float
    provider: str
    api: str
    service: str = ""
    attribution: dict[str, str] = field(default_factory=dict)
    api_key_id: str = ""
    trace_id: str = ""
    span_id: str = ""
    parent_span_id: str = ""
    transport: Transport = "http"
    connection_id: str = ""  # the client connection (every call of one WebSocket shares it)


@dataclass(slots=True)
class End:
    kind: EndKind
    mono: float
    message: str = ""


ParseErrorHook = Callable[[str, BaseException], None]


class Capture:
    """The state of one intercepted call."""

    def __init__(
        self,
        facts: RequestFacts,
        adapter: Adapter,
        on_parse_error: ParseErrorHook | None = None,
        *,
        fed: bool = False,
        request: Any = None,
    ) -> None:
        """``fed``: the adapter has seen the request already (a WebSocket call: ``request`` is the
        parsed message that started it), so it is not handed the body again."""
        self.facts = facts
        self.adapter = adapter
        self._on_parse_error = on_parse_error
        self.request_json: Any = request
        if not fed:
            try:
                self.request_json = json.loads(facts.body) if facts.body else None
            except ValueError:
                self.request_json = None
        self.parsing = True
        self.parse_error = ""
        try:
            if not fed:
                adapter.on_request(self.request_json)
                adapter.on_target(facts.path)
        except Exception as e:  # a hostile request body must not break capture
            self._parse_failed(e)
        self.status = 0
        self.resp_headers: list[tuple[str, str]] = []
        self.headers_mono: float | None = None
        self.response_bytes = 0
        self.framing: Framing | None = None
        self.error_body: Any = None  # the parsed body of a non-2xx response
        self._decoder: ContentDecoder | None = None
        self._framer: Framer | None = None
        self._hook: Callable[[Any, float], None] | None = None

    @property
    def streamed(self) -> bool:
        """The response was framed as a stream (SSE, NDJSON, event-stream, JSON array)."""
        return self.framing is not None and self.framing.stream

    # -- event loop side: must stay cheap and must never raise ------------------------
    def on_response_headers(self, status: int, headers: list[tuple[str, str]], mono: float) -> None:
        self.status = status
        self.resp_headers = headers
        self.headers_mono = mono
        hmap = dict(headers)
        try:
            self._decoder = make_decoder(hmap.get("content-encoding"))
            if 200 <= status < 300:
                self.framing = self.adapter.framing(hmap.get("content-type", "").lower(), self.facts.path)
                self._framer = self.framing.new()
                self._hook = getattr(self.adapter, self.framing.hook)
            else:  # an error body: parsed for the error taxonomy, never handed to the adapter
                self._framer = JSONBody(MAX_ERROR_BODY)
                self._hook = self._keep_error_body
        except Exception as e:
            self._parse_failed(e)

    def tee(self, data: bytes) -> bytes:
        """The ``flow.response.stream`` callable: returns ``data`` unchanged, always."""
        if data and self.parsing:
            try:
                self._feed(data, time.monotonic())
            except Exception as e:
                self._parse_failed(e)
        self.response_bytes += len(data)
        return data

    def _feed(self, data: bytes, t: float) -> None:
        framer, hook = self._framer, self._hook
        if framer is None or hook is None:
            return
        if self._decoder is not None:
            data = self._decoder.decode(data)
        for frame in framer.feed(data):
            hook(frame, t)

    def _keep_error_body(self, obj: Any, t: float) -> None:
        self.error_body = obj

    def _parse_failed(self, e: BaseException) -> None:
        self.parsing = False
        self.parse_error = f"{type(e).__name__}: {e}"[:300]
        if self._on_parse_error is not None:
            try:
                self._on_parse_error(self.facts.api, e)
            except Exception:
                pass

    # -- worker side ---------------------------------------------------------------------
    def finish(self, t: float) -> None:
        """End of the body: flush the decoder and the framer (a last event without its blank
        line, an NDJSON line without its newline, a whole JSON body)."""
        framer, hook = self._framer, self._hook
        if not self.parsing or framer is None or hook is None:
            return
        try:
            tail = self._decoder.flush() if self._decoder is not None else b""
            frames = framer.feed(tail) if tail else []
            for frame in [*frames, *framer.flush()]:
                hook(frame, t)
        except Exception as e:
            self._parse_failed(e)
