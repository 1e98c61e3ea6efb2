"""WebSocket frames → messages for the side parser: one direction of a relayed socket, bounded.

The proxy relays a WebSocket's bytes as they arrive (:mod:`llmtap.intercept.wsrelay`): nothing is
held, re-framed or re-compressed on the way. A :class:`MessageReader` reads a copy of one direction
(RFC 6455 framing, RFC 7692 permessage-deflate) into whole messages for the capture, within bounds
hostile traffic cannot push — a ~1 MB message inflating to 1 GiB, a message of endless fragments,
one huge frame:

- a message is assembled only up to ``max_message`` bytes (its payload after inflation); a longer
  one becomes :class:`Unparsed` (its size on the wire) and no more of it is kept, unmasked or, when
  the compression context starts afresh with each message, inflated;
- inflation is incremental and bounded per step: :meth:`~MessageReader.drain` produces at most
  ``budget`` bytes; what the budget does not cover waits, compressed, for the next step;
- when the compression context carries over from message to message (no ``*_no_context_takeover``),
  an oversized compressed message is inflated to its end with its output dropped, so that the next
  messages still decode — up to ``max_inflate`` bytes of it. Past that, when more than
  ``max_backlog`` bytes wait, or when a frame breaks the protocol, the direction is given up
  (:class:`GaveUp`): no more messages from it, only its close frame (when the framing still holds);
- what every reader holds at once (messages being assembled, input waiting) is also taken from a
  shared :class:`~llmtap.decode.body.Budget`, so many sockets together stay bounded too;
- fragments are kept in a list and joined once: no quadratic copies. Control frames (125 bytes at
  most) are read for the close code; pings and pongs are skipped.

Pure: no I/O. One reader per direction; :meth:`~MessageReader.feed` and ``drain`` on the event loop.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..errors import LlmtapError
from .body import Budget

DEFAULT_MAX_INFLATE = 64 * 1024 * 1024
MAX_BACKLOG = 8 * 1024 * 1024  # bytes waiting to be inflated or assembled: past it the direction is given up
_TAIL = b"\x00\x00\xff\xff"  # RFC 7692 7.2.2: the sync-flush marker a sender strips from each message
_FULL = "the side parser's shared buffer is full"

_DATA, _Z, _OVER, _END, _CLOSE = range(5)  # the queue between framing (feed) and assembly (drain)


@dataclass(frozen=True, slots=True)
class Message:
    text: bool
    payload: bytes


@dataclass(frozen=True, slots=True)
class Unparsed:
    """A message over the bound: relayed, not parsed. ``size``: its payload bytes on the wire."""

    size: int
    why: str


@dataclass(frozen=True, slots=True)
class Closed:
    code: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class GaveUp:
    why: str


Event = Message | Unparsed | Closed | GaveUp


class FrameError(LlmtapError, ValueError):
    pass


class MessageReader:
    """``deflate``: permessage-deflate was negotiated; ``reset_context``: this direction's sender
    starts a fresh compression context with every message (``*_no_context_takeover``)."""

    def __init__(
        self,
        max_message: int,
        *,
        deflate: bool = False,
        reset_context: bool = False,
        max_inflate: int = DEFAULT_MAX_INFLATE,
        max_backlog: int = MAX_BACKLOG,
        budget: Budget | None = None,
    ) -> None:
        self.max_message = max_message
        self.budget = budget
        self.max_inflate = max(max_inflate, max_message)
        self.max_backlog = max_backlog
        self._deflate, self._reset = deflate, reset_context
        self.gave_up = ""  # why messages are no longer read ('' while they are)
        self._lost = False  # the framing itself is lost (not a WebSocket stream): nothing more is read
        # framing: the frame being read and the message it belongs to
        self._head = bytearray()
        self._left = 0  # payload bytes of the current frame still to come
        self._in_frame = False
        self._fin = self._control = False
        self._opcode = 0
        self._mask: bytes | None = None
        self._mask_off = 0
        self._ctrl = bytearray()
        self._in_msg = self._msg_z = self._msg_over = False
        self._msg_text = False
        self._wire = 0  # payload bytes of the current message on the wire
        # between the two halves
        self._queue: deque[tuple[int, Any]] = deque()
        self._queued = 0
        # assembly
        self._parts: list[bytes] = []
        self._size = 0  # payload bytes of the message being assembled (inflated)
        self._over = False
        self._why = ""
        self._held = 0  # bytes of _parts, taken from the shared budget
        self._inflater: Any = None
        self._events: list[Event] = []

    # -- framing: cheap, bounded by the input --------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """New bytes of this direction, as relayed (any chunking)."""
        if self._lost or not data:
            return
        try:
            self._frames(memoryview(data))
        except FrameError as e:
            self._lost = True
            self.give_up(f"not a valid WebSocket stream ({e})")
        if self._queued > self.max_backlog:
            self.give_up(f"over {self.max_backlog >> 20} MiB waiting to be inflated")

    def _frames(self, data: memoryview) -> None:
        i, n = 0, len(data)
        while i < n and not self._lost:
            if not self._in_frame:
                i = self._header(data, i)
                continue
            take = min(self._left, n - i)
            self._payload(data[i : i + take])
            self._left -= take
            i += take
            if self._left == 0:
                self._frame_end()

    def _header(self, data: memoryview, i: int) -> int:
        head = self._head
        need = 2
        while True:
            if len(head) >= 2:
                short = head[1] & 0x7F
                need = 2 + (2 if short == 126 else 8 if short == 127 else 0) + (4 if head[1] & 0x80 else 0)
            if len(head) >= need:
                break
            if i >= len(data):
                return i
            take = min(need - len(head), len(data) - i)
            head += data[i : i + take]
            i += take
        b0, b1 = head[0], head[1]
        fin, rsv1, opcode, masked = bool(b0 & 0x80), bool(b0 & 0x40), b0 & 0x0F, bool(b1 & 0x80)
        short = b1 & 0x7F
        at = 2
        length = short
        if short == 126:
            length, at = int.from_bytes(head[2:4], "big"), 4
        elif short == 127:
            length, at = int.from_bytes(head[2:10], "big"), 10
        self._mask = bytes(head[at : at + 4]) if masked else None
        self._head = bytearray()
        if b0 & 0x30 or (rsv1 and not self._deflate):
            raise FrameError("reserved bit set")
        self._start_frame(fin, rsv1, opcode, length)
        if length == 0:
            self._frame_end()
        return i

    def _start_frame(self, fin: bool, rsv1: bool, opcode: int, length: int) -> None:
        self._in_frame, self._left, self._fin, self._opcode, self._mask_off = True, length, fin, opcode, 0
        self._control = opcode >= 8
        if self._control:
            if opcode not in (8, 9, 10) or not fin or length > 125 or rsv1:
                raise FrameError(f"bad control frame (opcode {opcode})")
            self._ctrl = bytearray()
            return
        if opcode == 0:
            if not self._in_msg or rsv1:
                raise FrameError("unexpected continuation frame")
            return
        if opcode not in (1, 2) or self._in_msg:
            raise FrameError(f"unexpected frame (opcode {opcode})")
        self._in_msg, self._msg_text, self._msg_z, self._msg_over, self._wire = True, opcode == 1, rsv1, False, 0

    def _payload(self, chunk: memoryview) -> None:
        if self._control:
            self._ctrl += self._unmask(chunk)
            return
        self._wire += len(chunk)
        if self._msg_over or self.gave_up:
            return  # over the bound and not compressed (or not read any more): counted, not even unmasked
        if not self._msg_z and self._wire > self.max_message:
            self._msg_over = True
            self._put(_OVER, f"message over {self.max_message:,} bytes", 0)
            return
        data = self._unmask(chunk)
        if self.budget is not None and not self.budget.take(len(data)):
            if self._msg_z:  # compressed: the rest of the socket depends on it
                self.give_up(_FULL)
            else:
                self._msg_over = True
                self._put(_OVER, _FULL, 0)
            return
        self._put(_Z if self._msg_z else _DATA, data, len(data), taken=True)

    def _frame_end(self) -> None:
        self._in_frame = False
        if self._control:
            if self._opcode == 8:
                self._put(_CLOSE, bytes(self._ctrl), 0)
            return
        if self._fin:
            if self._msg_z:
                self._put(_Z, _TAIL, len(_TAIL))
            self._put(_END, (self._wire, self._msg_text, self._msg_z), 0)
            self._in_msg = False

    def _unmask(self, chunk: memoryview) -> bytes:
        if self._mask is None:
            return bytes(chunk)
        n, o = len(chunk), self._mask_off % 4
        key = self._mask[o:] + self._mask[:o]
        self._mask_off += n
        mask = (key * (n // 4 + 1))[:n]
        return (int.from_bytes(chunk, "little") ^ int.from_bytes(mask, "little")).to_bytes(n, "little")

    def _put(self, kind: int, data: Any, size: int, taken: bool = False) -> None:
        if self.gave_up and kind != _CLOSE:
            if taken and self.budget is not None:
                self.budget.give(size)
            return
        if size and not taken and self.budget is not None and not self.budget.take(size):
            self.give_up(_FULL)
            return
        self._queue.append((kind, data))
        self._queued += size

    def _unqueue(self, n: int) -> None:
        self._queued -= n
        if n and self.budget is not None:
            self.budget.give(n)

    # -- assembly: bounded by the budget ---------------------------------------------------------------
    def pending(self) -> bool:
        """Input is waiting that the last step's budget did not cover."""
        return bool(self._queue)

    def drain(self, budget: int) -> list[Event]:
        """Whole messages (and closes) from what was fed, producing at most ``budget`` bytes of payload."""
        q = self._queue
        while q:
            kind, data = q[0]
            if kind == _DATA:
                if budget <= 0:
                    break
                q.popleft()
                self._unqueue(len(data))
                self._take(data)
                budget -= len(data)
            elif kind == _Z:
                if self._over and self._reset:  # the rest of this message cannot matter: not inflated
                    q.popleft()
                    self._unqueue(len(data))
                    continue
                if budget <= 0:
                    break
                budget -= self._inflate(data, budget)
            elif kind == _OVER:
                q.popleft()
                self._oversized(data)
            elif kind == _END:
                q.popleft()
                self._end(*data)
            else:
                q.popleft()
                self._events.append(_close(data))
        out, self._events = self._events, []
        return out

    def _inflate(self, data: bytes, budget: int) -> int:
        if self._inflater is None:
            self._inflater = zlib.decompressobj(-15)  # 15: the largest window, whatever the sender's
        d = self._inflater
        try:
            out = d.decompress(data, budget)
        except zlib.error as e:
            self.give_up(f"permessage-deflate data does not inflate ({e})")
            return 0
        if d.eof:
            self.give_up("permessage-deflate stream ended")
            return 0
        tail = d.unconsumed_tail
        self._unqueue(len(data) - len(tail))
        if tail or len(out) == budget:  # input left, or output zlib may still hold: the next step goes on
            self._queue[0] = (_Z, tail)
        else:
            self._queue.popleft()
        self._take(out)
        if self._over and self._size > self.max_inflate:
            self.give_up(f"a compressed message inflates past {self.max_inflate >> 20} MiB")
        return max(len(out), 1)

    def _take(self, chunk: bytes) -> None:
        if not chunk:
            return
        self._size += len(chunk)
        if self._over:
            return
        if self._size > self.max_message:
            self._oversized(f"message over {self.max_message:,} bytes")
        elif self.budget is not None and not self.budget.take(len(chunk)):
            self._oversized(_FULL)
        else:
            self._parts.append(chunk)
            self._held += len(chunk)

    def _drop_parts(self) -> None:
        if self._held and self.budget is not None:
            self.budget.give(self._held)
        self._parts, self._held = [], 0

    def _oversized(self, why: str) -> None:
        if not self._over:
            self._over, self._why = True, why
        self._drop_parts()

    def _end(self, wire: int, text: bool, compressed: bool) -> None:
        if self._over:
            self._events.append(Unparsed(wire, f"{self._why}: relayed, not parsed"))
        else:
            self._events.append(Message(text, b"".join(self._parts)))
        self._drop_parts()
        self._size, self._over = 0, False
        if compressed and self._reset:
            self._inflater = None

    def give_up(self, why: str) -> None:
        if self.gave_up:
            return
        self.gave_up = why
        closes = [item for item in self._queue if item[0] == _CLOSE]  # still to be said, in order
        self.close()
        self._queue.extend(closes)
        self._events.append(GaveUp(why))

    def close(self) -> None:
        """Free what is held (the socket ended): the shared budget gets it back."""
        self._queue.clear()
        self._unqueue(self._queued)
        self._drop_parts()
        self._inflater = None


def _close(payload: bytes) -> Closed:
    if len(payload) < 2:
        return Closed(None, "")
    return Closed(int.from_bytes(payload[:2], "big"), payload[2:].decode("utf-8", "replace"))
