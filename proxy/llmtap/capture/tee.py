"""Per-call capture on the event loop: request facts in, a tee for response chunks.

This module knows nothing about mitmproxy. The addon hands it plain values; the tee
(:meth:`Capture.tee`) is the ``flow.response.stream`` callable and must never raise or
change the bytes. It holds one content decoder and one framer, chosen when the response
headers arrive, and hands each frame to the adapter hook the framing names. Everything
expensive (whole JSON bodies, estimation, percentiles) happens later, on the worker
(:mod:`.build`).

Thread contract: every method here runs on the proxy's event loop and must stay cheap;
:meth:`Capture.finish` runs on the worker, after the event loop is done with the call.

Self-overhead: :attr:`Capture.loop_ns` sums the time llmtap's own code spent on the event loop
for the call (the addon's hooks and every chunk the tee parsed), read with ``perf_counter_ns``
around each piece; it becomes the record's ``overhead_ms`` (``llmtap_overhead_seconds``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from ..adapters import Adapter
from ..decode import Framer, Framing, JSONBody, make_decoder
from ..decode.compression import ContentDecoder
from ..errors import LlmtapError
from ..providers import ProviderName
from ..record import Api, EndKind, Transport

log = logging.getLogger("llmtap.capture")

MAX_ERROR_BODY = 1024 * 1024
# Bounds of the side parser, per response: decoded bytes it parses at all (beyond, it stops and the
# record says so; the bytes keep flowing untouched), and decoded bytes per chunk on the event loop
# (a compressed chunk that inflates further is inflated on the next chunk, or at the end on the worker).
MAX_DECODED = 32 * 1024 * 1024
# 8 KiB: mitmproxy drains a burst of buffered chunks without yielding, so a fast upstream (a 2 GiB
# brotli SSE bomb: ~100 chunks at once) cost ~100 x this of parsing back to back: at 32 KiB another
# stream's events arrived 100-380 ms late, at 8 KiB 10-30 ms (tests/e2e/test_hostile_traffic.py).
LOOP_STEP = 8 * 1024
# A stream whose decoding fell behind (only a bomb inflates that fast) is finished on the worker up to
# this much more: parsing millions of tiny events there would hold the GIL the event loop needs.
MAX_DEFERRED_STREAM = 1024 * 1024


MAX_BUFFERED = 256 * 1024 * 1024  # bytes every JSON body being buffered may hold at once, all calls together


class ResponseTooLarge(LlmtapError, ValueError):
    pass


class SharedBudget:
    """The :class:`~llmtap.decode.body.Budget` of all captures: buffered on the loop, freed on the worker."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self.used + n > self.limit:
                return False
            self.used += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.used = max(self.used - n, 0)


BUFFERED = SharedBudget(MAX_BUFFERED)


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
    provider: ProviderName
    api: Api
    service: str = ""
    attribution: dict[str, str] = field(default_factory=dict)
    api_key_id: str = ""
    trace_id: str = ""
    span_id: str = ""
    parent_span_id: str = ""
    transport: Transport = "http"
    connection_id: str = ""  # the client connection (every call of one WebSocket shares it)
    body_size: int = -1  # bytes on the wire when the body was streamed (``body`` is then empty)
    body_hash: str = ""  # its hash, counted on the way (``request_hash``)
    body_note: str = ""  # why its fields are missing (over the parse bound, undecodable), else ''


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
        parsed: bool = False,
    ) -> None:
        """``fed``: the adapter has seen the request already (a WebSocket call: ``request`` is the
        parsed message that started it), so it is not handed the body again. ``parsed``: ``request``
        is the body, parsed already (off the event loop, within its bound)."""
        self.facts = facts
        self.adapter = adapter
        self._on_parse_error = on_parse_error
        self.loop_ns = 0  # llmtap's own time on the event loop for this call (see the module doc)
        self.request_json: Any = request
        if not fed and not parsed:  # a small body handed over whole: parsed here
            try:
                self.request_json = json.loads(facts.body) if facts.body else None
            except ValueError:
                self.request_json = None
        self.parsing = True
        self.parse_error = facts.body_note
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
        self.decoded_bytes = 0
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
                if isinstance(self._framer, JSONBody):
                    self._framer.budget = BUFFERED
                self._hook = getattr(self.adapter, self.framing.hook)
            else:  # an error body: parsed for the error taxonomy, never handed to the adapter
                self._framer = JSONBody(MAX_ERROR_BODY, BUFFERED)
                self._hook = self._keep_error_body
        except Exception as e:
            self._parse_failed(e)

    def tee(self, data: bytes) -> bytes:
        """The ``flow.response.stream`` callable: returns ``data`` unchanged, always."""
        if data and self.parsing:
            t0 = perf_counter_ns()
            try:
                self._feed(data, time.monotonic())
            except Exception as e:
                self._parse_failed(e)
            self.loop_ns += perf_counter_ns() - t0
        self.response_bytes += len(data)
        return data

    def _feed(self, data: bytes, t: float, step: int = LOOP_STEP) -> None:
        framer, hook, decoder = self._framer, self._hook, self._decoder
        if framer is None or hook is None:
            return
        if decoder is None:
            self._frames(framer, hook, data, t)
            return
        piece = decoder.decode(data, step)
        while True:
            self._frames(framer, hook, piece, t)
            step -= len(piece)
            if step <= 0 or not decoder.pending():
                return
            piece = decoder.decode(b"", step)

    def _frames(self, framer: Framer, hook: Callable[[Any, float], None], data: bytes, t: float) -> None:
        if not data:
            return
        self.decoded_bytes += len(data)
        if self.decoded_bytes > MAX_DECODED:
            raise ResponseTooLarge(f"response over {MAX_DECODED >> 20} MiB decoded: parsing stopped, bytes passed")
        for frame in framer.feed(data):
            hook(frame, t)

    def _keep_error_body(self, obj: Any, t: float) -> None:
        self.error_body = obj

    def release(self) -> None:
        """Give back what the body buffered (a capture dropped before it was built)."""
        if isinstance(self._framer, JSONBody):
            self._framer._release()

    def _parse_failed(self, e: BaseException) -> None:
        self.parsing = False
        self._decoder = None  # what it still holds (compressed) is never inflated
        if isinstance(self._framer, JSONBody):
            self._framer._release()
        self._framer = None
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
        framer, hook, decoder = self._framer, self._hook, self._decoder
        if not self.parsing or framer is None or hook is None:
            return
        try:
            deferred = 0
            while decoder is not None:  # what the loop left inflated-later, bounded by MAX_DECODED
                tail = decoder.flush(LOOP_STEP * 8)
                if not tail:
                    break
                deferred += len(tail)
                if self.streamed and deferred > MAX_DEFERRED_STREAM:
                    raise ResponseTooLarge("stream inflating faster than it parses: parsing stopped, bytes passed")
                self._frames(framer, hook, tail, t)
                time.sleep(0)  # let the event loop's thread take the GIL between steps
            for frame in framer.flush():
                hook(frame, t)
        except Exception as e:
            self._parse_failed(e)
