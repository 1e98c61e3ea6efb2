"""What a proxy worker hands to the recorder: the raw facts of each call, in batches.

The proxy's processes (:mod:`llmtap.intercept`) do nothing per call but copy what the wire shows
(request line and headers, the body's bytes, the response's status, headers and chunks with the
time each arrived, how the call ended) into these messages; everything that costs — parsing,
building the record, pricing, the store — happens in the recorder's process
(:mod:`llmtap.capture.recorder`), which replays the same bytes at the same times through the same
parsers, so a row is what it would have been had the parse run on the proxy's loop.

Messages are typed tuples (:class:`typing.NamedTuple`), sent as ``marshal``-encoded lists, one
frame per batch: ``u32 length`` + payload. ``marshal`` is safe here because both ends are llmtap
processes over a socketpair the supervisor made; it is never used on bytes from the network.

Ids: a worker numbers its calls (``call``); the recorder keys them by (worker, call). A WebSocket
is the call of its upgrade request: its messages carry that id.
"""

from __future__ import annotations

import marshal
import struct
from typing import Any, NamedTuple, get_args

from .providers import ProviderName
from .record import EndKind

MAX_REQUEST_BODY = 32 * 1024 * 1024  # request bytes the recorder parses; beyond, only counted and hashed
Chunk = tuple[float, bytes]  # (monotonic arrival time, the bytes as they came off the wire)
Headers = list[tuple[str, str]]  # names lower-cased, in order, repeated names kept


class RequestPart(NamedTuple):
    """Request-body chunks handed off before the body ended (a large upload: the worker holds none of it)."""

    call: int
    chunks: list[bytes]


class Gap(NamedTuple):
    """Bytes of a call not handed off (the recorder was :data:`~llmtap.intercept.outbox.MAX_BUFFER` behind):
    the call is still recorded, from what its transport showed, and says so."""

    call: int
    request: bool  # request-body bytes (else response bytes)
    size: int


class Request(NamedTuple):
    """A call's request line, headers and body, sent once the body has ended (or at the upgrade of a
    WebSocket). ``headers`` are as the client sent them (attribution headers included: the worker
    strips them from what goes upstream). ``body`` is what followed the last :class:`RequestPart`
    (all of it for most calls); ``body_size`` counts every byte. A body larger than a part is hashed by the
    worker as it comes (``body_hash``; the recorder hashes the others), and only its first
    :data:`MAX_REQUEST_BODY` bytes are handed off (``over``: the rest was not)."""

    call: int
    start_wall: float
    start_mono: float
    method: str
    host: str
    port: int
    path: str
    headers: Headers
    body: bytes
    body_size: int
    body_hash: str
    over: bool
    provider: ProviderName
    adapter: str  # the adapter class's name (``llmtap.adapters``), or the WebSocket adapter's for an upgrade
    model: str  # the model named in the path ('' when the body names it)
    proxy_user: str  # the service the proxy URL's user names ('' none)
    connection: str  # the client connection's id
    websocket: bool  # an upgrade request: its socket's messages follow
    loop_ns: int  # llmtap's own time on the proxy's loop so far


class Response(NamedTuple):
    call: int
    status: int
    headers: Headers
    mono: float


class Body(NamedTuple):
    """Response chunks, in order; sent when enough is held, and with the end."""

    call: int
    chunks: list[Chunk]


class End(NamedTuple):
    call: int
    kind: EndKind
    mono: float
    message: str
    loop_ns: int  # llmtap's own loop time since the request message


class SocketOpen(NamedTuple):
    """The upgrade was answered with a socket: its calls are its messages."""

    call: int
    headers: Headers
    mono: float


class SocketMessage(NamedTuple):
    call: int
    from_client: bool
    mono: float
    content: bytes


class SocketUnparsed(NamedTuple):
    """A message the relay passed on without assembling it (over ``--ws-max-message-mb``: ``why``);
    ``stop``: the relay no longer reads the socket at all."""

    call: int
    from_client: bool
    mono: float
    why: str
    stop: bool


class SocketClose(NamedTuple):
    call: int
    closed_by_client: bool | None  # None: neither side closed it (the connection broke)
    mono: float
    reason: str


class Barrier(NamedTuple):
    """The supervisor's marker, sent to a worker and echoed back after everything it handed off before: once
    it is back, the recorder has every call that worker had finished (a read then sees them all)."""

    seq: int


class WorkerState(NamedTuple):
    """A worker's health, sent when it changes (at most every :data:`STATE_EVERY_S`)."""

    worker: int
    running: bool
    draining: bool
    inflight: int
    open_websockets: int
    loop_tasks: int
    client_connections: int
    dropped: dict[str, int]  # client connections dropped since start, by reason (cumulative)
    startup_error: str  # a worker that could not start says why, once, and exits


Message = (
    RequestPart
    | Request
    | Response
    | Body
    | End
    | Gap
    | SocketOpen
    | SocketMessage
    | SocketClose
    | Barrier
    | WorkerState
    | SocketUnparsed
)
KINDS: tuple[type[Any], ...] = get_args(Message)  # the wire tag is the position in Message
_TAG: dict[type[Any], int] = {cls: i for i, cls in enumerate(KINDS)}
STATE_EVERY_S = 0.2
_LEN = struct.Struct("<I")
MAX_FRAME = 256 << 20  # a batch bigger than this is a broken peer, not a batch


def encode(batch: list[Message]) -> bytes:
    """One frame: the batch's messages as (tag, fields) tuples, marshalled, length first."""
    payload = marshal.dumps([(_TAG[type(m)], tuple(m)) for m in batch])
    return _LEN.pack(len(payload)) + payload


class Decoder:
    """Frames in (any split), messages out."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Message]:
        buf = self._buf
        buf += data
        out: list[Message] = []
        pos = 0
        while len(buf) - pos >= 4:
            (n,) = _LEN.unpack_from(buf, pos)
            if n > MAX_FRAME:
                raise ValueError(f"handoff frame of {n} bytes: the peer is broken")
            if len(buf) - pos - 4 < n:
                break
            payload = bytes(buf[pos + 4 : pos + 4 + n])
            pos += 4 + n
            out.extend(KINDS[tag](*fields) for tag, fields in marshal.loads(payload))
        if pos:
            del buf[:pos]
        return out
