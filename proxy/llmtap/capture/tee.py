"""One call's capture: request facts in, the response's bytes fed at the times they arrived.

This module knows nothing about mitmproxy. It runs in the recorder (:mod:`.recorder`), which replays
what a proxy worker handed off (:mod:`llmtap.handoff`): :meth:`Capture.feed` takes each chunk with its
wire arrival time. A capture holds one content decoder and one framer, chosen when the response
headers arrive, and hands each frame to the adapter hook the framing names (bound once,
:meth:`~llmtap.adapters.Adapter.hook_for`). Its parse is bounded (decoded bytes per response and per
chunk) and never raises: a failure stops parsing for the call, is counted, and the record says so.
Then :mod:`.build` makes the record.

One constructor per kind of call: :class:`Capture` for an HTTP call (and a WebSocket's upgrade), and
:meth:`Capture.for_turn` for a call made of a WebSocket's messages.

Self-overhead: :attr:`Capture.loop_ns` sums llmtap's own time for the call: the worker's, on the
proxy's loop, and the recorder's; it becomes the record's ``overhead_ms`` (``llmtap_overhead_seconds``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..adapters import Adapter, Turn
from ..decode import WEBSOCKET, Framer, Framing, JSONBody, make_decoder
from ..decode.body import Bytes
from ..decode.compression import ContentDecoder
from ..errors import LlmtapError
from ..providers import ProviderName
from ..record import Api, CaptureMode, EndKind, Transport

log = logging.getLogger("llmtap.capture")

MAX_ERROR_BODY = 1024 * 1024
# Bounds of the side parser, per response: decoded bytes it parses at all (beyond, it stops and the
# record says so; the bytes flowed untouched), and decoded bytes per chunk (a compressed chunk that
# inflates further is inflated with the next chunk, or at the end) — as when the parse ran on the proxy's
# loop, where 8 KiB per chunk kept a 2 GiB brotli SSE bomb from stalling other streams: the recorder keeps
# the same steps (one call's bomb cannot hold the recording of the others), and its records are the same.
MAX_DECODED = 32 * 1024 * 1024
LOOP_STEP = 8 * 1024
# A stream whose decoding fell behind (only a bomb inflates that fast) is finished at its end up to this
# much more: parsing millions of tiny events would hold the recorder for everyone else.
MAX_DEFERRED_STREAM = 1024 * 1024


MAX_BUFFERED = 256 * 1024 * 1024  # bytes every JSON body being buffered may hold at once, all calls together


class ResponseTooLarge(LlmtapError, ValueError):
    pass


class SharedBudget(Bytes):
    """The :class:`~llmtap.decode.body.Budget` of all captures' whole bodies (thread-safe)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            return super().take(n)

    def give(self, n: int) -> None:
        with self._lock:
            super().give(n)


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
    capture_mode: CaptureMode = "regular"  # how the sidecar received the connection (``--mode``)


@dataclass(slots=True)
class End:
    kind: EndKind
    mono: float
    message: str = ""


ParseErrorHook = Callable[[str, BaseException], None]


def parse_failed(api: str, e: BaseException, on_parse_error: ParseErrorHook | None) -> str:
    """A side parser's failure, counted (``on_parse_error``) and described for the record's ``parse_error``."""
    if on_parse_error is not None:
        try:
            on_parse_error(api, e)
        except Exception:
            pass
    return f"{type(e).__name__}: {e}"[:300]


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
        path_model: str = "",
        loop_ns: int = 0,
    ) -> None:
        """``fed``: the adapter has seen the request already (a WebSocket call: ``request`` is the
        parsed message that started it), so it is not handed the body again. ``parsed``: ``request``
        is the body, parsed already (within its bound). ``path_model``: the model the path names (Gemini,
        Azure deployments, Bedrock), for a body that names none. ``loop_ns``: llmtap's time so far."""
        self.facts = facts
        self.adapter = adapter
        self._on_parse_error = on_parse_error
        self.loop_ns = loop_ns  # llmtap's own time for this call (see the module doc)
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
        if not adapter.req.model:
            adapter.req.model = path_model
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

    @classmethod
    def for_turn(
        cls,
        facts: RequestFacts,
        turn: Turn,
        headers: list[tuple[str, str]],
        parse_error: str = "",
        on_parse_error: ParseErrorHook | None = None,
    ) -> Capture:
        """A call made of a WebSocket's messages (its :class:`~llmtap.adapters.Turn`): its request is the
        message that started it, its "response headers" the upgrade's and its first server event, its
        response the events the turn's adapter has seen already."""
        cap = cls(facts, turn.adapter, on_parse_error, fed=True, request=turn.request)
        cap.status = 101
        cap.resp_headers = headers
        cap.headers_mono = turn.first_server
        cap.response_bytes = turn.response_bytes
        cap.framing = WEBSOCKET
        cap.parse_error = parse_error or cap.parse_error
        return cap

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
                self._framer = self.framing.new(BUFFERED)
                self._hook = self.adapter.hook_for(self.framing.hook)
            else:  # an error body: parsed for the error taxonomy, never handed to the adapter
                self._framer = JSONBody(MAX_ERROR_BODY, BUFFERED)
                self._hook = self._keep_error_body
        except Exception as e:
            self._parse_failed(e)

    def feed(self, data: bytes, t: float) -> None:
        """Response bytes as they came off the wire at monotonic time ``t``; never raises."""
        if data and self.parsing:
            try:
                self._feed(data, t)
            except Exception as e:
                self._parse_failed(e)
        self.response_bytes += len(data)

    def tee(self, data: bytes) -> bytes:
        """Feeds ``data`` as arrived now and returns it unchanged (a capture driven directly: tests, tools)."""
        self.feed(data, time.monotonic())
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
        if self._framer is not None:
            self._framer.release()

    def stop_parsing(self, why: str) -> None:
        """Parse no further (what is missing would make the rest wrong); the record says why."""
        self.parsing = False
        self._decoder = None
        self.release()
        self._framer = None
        self.parse_error = why[:300]

    def _parse_failed(self, e: BaseException) -> None:
        self.parsing = False
        self._decoder = None  # what it still holds (compressed) is never inflated
        self.release()
        self._framer = None
        self.parse_error = parse_failed(self.facts.api, e, self._on_parse_error)

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
