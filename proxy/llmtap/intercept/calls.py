"""The state of one captured call on the proxy's loop: what the wire showed, held until it is handed off.

One :class:`CallState` per flow, under one metadata key (:data:`KEY`): the request's facts, a
:class:`RequestTee` for its body and a :class:`ResponseTee` for its response. The tees are the
``stream`` callables mitmproxy calls per chunk: they return the chunk unchanged and only keep it
(with its arrival time), so nothing but a list append happens per chunk on the loop. Parsing happens
in the recorder (:mod:`llmtap.capture.recorder`), fed by :mod:`llmtap.handoff` messages.

Memory: a request body is kept up to :data:`~llmtap.handoff.MAX_REQUEST_BODY` (the recorder's parse bound), then
only counted and hashed; response chunks are handed off whenever :data:`HANDOFF_BYTES` are held, so
a long stream never accumulates here.

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
from ..record import EndKind

KEY = "llmtap"  # the one flow.metadata key llmtap uses
HANDOFF_BYTES = 256 * 1024  # response bytes held before they are handed off mid-call

Put = Callable[[handoff.Message], None]


class RequestTee:
    """The ``flow.request.stream`` callable of a call: returns each chunk unchanged, keeps it up to the bound."""

    __slots__ = ("chunks", "sha", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] | None = []
        self.size = 0
        self.sha: hashlib._Hash | None = None  # hashing starts only past the bound (the recorder hashes the rest)

    def __call__(self, data: bytes) -> bytes:
        if data:
            self.size += len(data)
            chunks = self.chunks
            if chunks is not None:
                chunks.append(data)
                if self.size > MAX_REQUEST_BODY:
                    self.sha = hashlib.sha256()
                    for c in chunks:
                        self.sha.update(c)
                    self.chunks = None
            elif self.sha is not None:
                self.sha.update(data)
        return data

    def body(self) -> tuple[bytes, str]:
        """(the body when kept whole, else b''; its hash when not kept, else '')."""
        if self.chunks is not None:
            return b"".join(self.chunks), ""
        return b"", self.sha.hexdigest()[:32] if self.sha is not None and self.size else ""


@dataclass(slots=True)
class CallState:
    """One captured call of a flow (a WebSocket's upgrade request included)."""

    call: int
    start_wall: float
    start_mono: float
    headers: handoff.Headers
    provider: str
    adapter: str
    model: str
    proxy_user: str
    websocket: bool = False
    socket_open: bool = False  # a WebSocket's upgrade was answered and its socket started
    body: RequestTee = field(default_factory=RequestTee)
    chunks: list[handoff.Chunk] = field(default_factory=list)
    held: int = 0
    loop_ns: int = 0
    sent: bool = False  # the Request message went out (the rest may follow)
    ending: tuple[EndKind, str] | None = None  # set by the hook that ended the call: (how, why)

    def take_loop_ns(self) -> int:
        n, self.loop_ns = self.loop_ns, 0
        return n

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
