"""The state of one captured call on the proxy's loop: what the wire showed, held until it is handed off.

One :class:`CallState` per flow, under one metadata key (:data:`KEY`): the request's facts, a
:class:`RequestTee` for its body and a :class:`ResponseTee` for its response. The tees are the
``stream`` callables mitmproxy calls per chunk: they return the chunk unchanged and only keep it
(with its arrival time), so nothing but a list append happens per chunk on the loop. Parsing happens
in the recorder (:mod:`llmtap.capture.recorder`), fed by :mod:`llmtap.handoff` messages.

Memory: request and response chunks are handed off whenever :data:`HANDOFF_BYTES` are held, so neither a
large upload nor a long stream accumulates here (the recorder keeps what it parses, within its bounds).

Self-overhead: :func:`counted` is the hooks' one clock — it wraps every addon hook and adds the hook's
time to the call it worked on (``loop_ns``); the response tee adds its own per chunk. The time travels with
the call's messages and becomes part of ``overhead_ms``.

Thread contract: every method runs on the proxy's event loop.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from time import monotonic, perf_counter_ns
from typing import Any

from .. import handoff
from ..handoff import MAX_REQUEST_BODY
from ..providers import ProviderName
from ..record import EndKind

KEY = "llmtap"  # the one flow.metadata key llmtap uses
HANDOFF_BYTES = 256 * 1024  # request or response bytes held before they are handed off mid-call

Put = Callable[[handoff.Message], None]


@dataclass(slots=True)
class CallState:
    """One captured call of a flow (a WebSocket's upgrade request included)."""

    call: int
    start_wall: float
    start_mono: float
    headers: handoff.Headers
    provider: ProviderName
    adapter: str
    model: str
    proxy_user: str
    websocket: bool = False
    host: str = ""  # the name it was addressed to (routing.call_host), when it is not the request's host
    socket_open: bool = False  # a WebSocket's upgrade was answered and its socket started
    body: list[bytes] = field(default_factory=list)  # request chunks not handed off yet
    body_size: int = 0
    parts: bool = False  # request chunks were handed off before the request ended
    body_sha: Any = None  # a large body is hashed here as it comes (hashlib's sha256)
    chunks: list[handoff.Chunk] = field(default_factory=list)
    held: int = 0
    loop_ns: int = 0
    sent: bool = False  # the Request message went out (the rest may follow)
    ending: tuple[EndKind, str] | None = None  # set by the hook that ended the call: (how, why)

    def take_loop_ns(self) -> int:
        n, self.loop_ns = self.loop_ns, 0
        return n

    def request_tee(self, put: Put) -> Callable[[bytes], bytes]:
        """The ``flow.request.stream`` callable: returns each chunk unchanged, keeps it, hands off what it
        holds every :data:`HANDOFF_BYTES` (an upload of any size costs the worker no memory)."""

        def tee(data: bytes) -> bytes:
            if data:
                self.take_body(data, put)
            return data

        return tee

    def take_body(self, data: bytes, put: Put) -> None:
        if self.body_sha is None and self.held + len(data) >= HANDOFF_BYTES:
            self.body_sha = hashlib.sha256()  # a large body: hashed here, a chunk at a time, from now on
            for chunk in self.body:
                self.body_sha.update(chunk)
        if self.body_sha is not None:
            self.body_sha.update(data)
        self.body_size += len(data)
        if self.body_size > MAX_REQUEST_BODY:  # past the recorder's parse bound: counted and hashed only
            self.body, self.held = [], 0
            return
        self.body.append(data)
        self.held += len(data)
        if self.held >= HANDOFF_BYTES:
            put(handoff.RequestPart(self.call, self.body))
            self.body, self.held, self.parts = [], 0, True

    def request_body(self) -> tuple[bytes, str, bool]:
        """(what is held of the request body, handed over; its hash when this worker took it; over the bound)."""
        body, self.body, self.held = b"".join(self.body), [], 0
        digest = self.body_sha.hexdigest()[:32] if self.body_sha is not None else ""
        return body, digest, self.body_size > MAX_REQUEST_BODY

    def response_tee(self, put: Put) -> Callable[[bytes], bytes]:
        """The ``flow.response.stream`` callable: keeps (arrival time, chunk), hands off what it holds
        every :data:`HANDOFF_BYTES`."""

        def tee(data: bytes) -> bytes:
            if data:
                t0 = perf_counter_ns()
                self.chunks.append((monotonic(), data))
                self.held += len(data)
                if self.held >= HANDOFF_BYTES:
                    put(handoff.Body(self.call, self.chunks))
                    self.chunks, self.held = [], 0
                self.loop_ns += perf_counter_ns() - t0
            return data

        return tee

    def end(self, put: Put) -> None:
        """The call is over (``ending`` says how): what is still held, then its end."""
        kind, message = self.ending or ("complete", "")
        if self.chunks:
            put(handoff.Body(self.call, self.chunks))
            self.chunks, self.held = [], 0
        put(handoff.End(self.call, kind, monotonic(), message, self.take_loop_ns()))


Hook = Callable[[Any, Any], "CallState | None"]


def counted(hook: Hook) -> Callable[[Any, Any], None]:
    """An addon hook, timed: its own time goes to the call it returns (the one it worked on), and a call it
    ended (``ending`` set) is handed off after that, so the end carries every hook's time."""

    @functools.wraps(hook)
    def run(addon: Any, flow: Any) -> None:
        t0 = perf_counter_ns()
        state = hook(addon, flow)
        if state is not None:
            state.loop_ns += perf_counter_ns() - t0
            if state.ending is not None:
                state.end(addon.put)

    return run
