"""Incremental Server-Sent Events decoder (WHATWG HTML §9.2.5-9.2.6).

Pure and allocation-light: bytes in, events out. Lines are decoded as UTF-8 only
once complete, so a multi-byte character split across chunks is handled for free.
Memory is bounded: a line or an event larger than ``max_event_bytes`` is dropped
(counted in ``oversized``) instead of being buffered without limit.

One deliberate deviation from WHATWG: a line that starts with ``{`` (no field name) is
dispatched at once as a ``message`` event, as the Gemini SDK does — Google sends errors as
bare JSON lines inside an SSE stream.
"""

from __future__ import annotations

from dataclasses import dataclass

_BOM = b"\xef\xbb\xbf"
DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024


@dataclass(slots=True, frozen=True)
class SSEEvent:
    event: str
    data: str
    id: str = ""


class SSEDecoder:
    """Feed bytes with :meth:`feed`; any chunking yields the same events."""

    __slots__ = (
        "_bom_state",
        "_buf",
        "_data",
        "_discard_line",
        "_drop_event",
        "_event",
        "_id",
        "_size",
        "_skip_lf",
        "comments",
        "lines",
        "max_event_bytes",
        "oversized",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._buf = bytearray()
        self._skip_lf = False
        self._bom_state = 0  # 0: not checked, 1: checked
        self._data: list[str] = []
        self._event = ""
        self._id = ""
        self._size = 0
        self._discard_line = False
        self._drop_event = False
        self.max_event_bytes = max_event_bytes
        self.comments = 0
        self.oversized = 0
        self.lines = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        if not chunk:
            return out
        if self._idle() and chunk.endswith(b"\n\n") and b"\r" not in chunk:
            whole = self._whole_events(chunk, out)
            if whole is not None:
                return whole
        buf = self._buf
        buf += chunk
        if self._bom_state == 0:
            if len(buf) < 3 and _BOM.startswith(bytes(buf)):
                return out  # could still become a BOM
            if buf.startswith(_BOM):
                del buf[:3]
            self._bom_state = 1
        pos = 0
        n = len(buf)
        if self._skip_lf and n and buf[0] == 0x0A:
            pos = 1
        self._skip_lf = False
        cr = buf.find(b"\r", pos)
        while pos < n:
            lf = buf.find(b"\n", pos)
            if cr != -1 and cr < pos:
                cr = buf.find(b"\r", pos)
            if cr != -1 and (lf == -1 or cr < lf):
                end = cr
                if cr + 1 < n:
                    nxt = cr + 2 if buf[cr + 1] == 0x0A else cr + 1
                else:
                    nxt = cr + 1
                    self._skip_lf = True
            elif lf != -1:
                end, nxt = lf, lf + 1
            else:
                break
            if self._discard_line:
                self._discard_line = False
            else:
                self._line(bytes(buf[pos:end]), out)
            pos = nxt
        if pos:
            del buf[:pos]
        if len(buf) > self.max_event_bytes:
            # A line without an end in sight: drop it, and the event it belongs to.
            buf.clear()
            self._discard_line = True
            self._drop_event = True
            self.oversized += 1
        return out

    def _idle(self) -> bool:
        """Between events, with nothing carried over: a chunk of whole events can be split at once."""
        return (
            self._bom_state == 1
            and not self._buf
            and not self._skip_lf
            and not self._data
            and not self._event
            and not self._discard_line
            and not self._drop_event
        )

    def _whole_events(self, chunk: bytes, out: list[SSEEvent]) -> list[SSEEvent] | None:
        """A chunk of whole ``\\n``-separated events (how servers flush them): each single ``data:`` line
        event taken as is, any other block through the line parser — the same events either way.
        ``None``: the chunk is not such a run of blocks (the caller parses it line by line)."""
        blocks = chunk.split(b"\n\n")
        if blocks.pop():
            return None  # "...\n\n\n": the last separator is not where the chunk ends
        lines = self.lines + chunk.count(b"\n")
        limit = self.max_event_bytes
        for block in blocks:
            if block.startswith(b"data: ") and b"\n" not in block and len(block) <= limit and self._id == "":
                out.append(SSEEvent("message", block[6:].decode("utf-8", "replace")))
                continue
            for line in block.split(b"\n") if block else ():
                self._line(line, out)
            self._line(b"", out)
        self.lines = lines
        return out

    def release(self) -> None:
        """Drop what is buffered (the call stopped being parsed)."""
        self._buf.clear()
        self._data = []

    def flush(self) -> list[SSEEvent]:
        """The end of the stream: an event not followed by a blank line still counts for an observer."""
        return self.feed(b"\n\n")

    def _line(self, raw: bytes, out: list[SSEEvent]) -> None:
        self.lines += 1
        if not raw:
            self._dispatch(out)
            return
        if raw[0] == 0x3A:  # ':' comment / keep-alive
            self.comments += 1
            return
        if raw[0] == 0x7B:  # '{': a bare JSON line (Gemini errors)
            out.append(SSEEvent("message", raw.decode("utf-8", "replace")))
            return
        line = raw.decode("utf-8", "replace")
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._size += len(raw)
            if self._size > self.max_event_bytes:
                if not self._drop_event:
                    self.oversized += 1
                self._drop_event = True
                self._data.clear()
                return
            if not self._drop_event:
                self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self._id = value
        # "retry" and unknown fields do not matter to an observer.

    def _dispatch(self, out: list[SSEEvent]) -> None:
        data = self._data
        if data and not self._drop_event:
            out.append(SSEEvent(self._event or "message", "\n".join(data), self._id))
        self._data = []
        self._event = ""
        self._size = 0
        self._drop_event = False
