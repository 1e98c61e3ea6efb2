"""Incremental decoders for the non-SSE stream framings: NDJSON, streamed JSON arrays, AWS event-stream.

Like the SSE decoder they are pure, accept any chunking, and bound their memory: a record
larger than ``max_bytes`` is dropped (counted in ``oversized``) and the decoder resynchronises.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_BYTES = 8 * 1024 * 1024


class NDJSONDecoder:
    """One JSON value per line (Ollama's ``application/x-ndjson``). Unparseable lines are skipped."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._buf = bytearray()
        self.max_bytes = max_bytes
        self.oversized = self.invalid = 0
        self._discard = False

    def feed(self, chunk: bytes) -> list[Any]:
        self._buf += chunk
        out: list[Any] = []
        while (i := self._buf.find(b"\n")) >= 0:
            line = bytes(self._buf[:i]).strip()
            del self._buf[: i + 1]
            if self._discard:
                self._discard = False
                continue
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    self.invalid += 1
        if len(self._buf) > self.max_bytes:
            self._buf.clear()
            self._discard = True
            self.oversized += 1
        return out

    def flush(self) -> list[Any]:
        return self.feed(b"\n")


class JSONArrayDecoder:
    """Elements of a top-level JSON array as they complete (Gemini streamGenerateContent without alt=sse).

    Also accepts a bare object instead of an array (an error body) and yields it when complete.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._buf = bytearray()
        self._depth = 0  # depth inside the current element
        self._in_str = False
        self._esc = False
        self._start = -1
        self._top_seen = False
        self.max_bytes = max_bytes
        self.oversized = self.invalid = 0

    def feed(self, chunk: bytes) -> list[Any]:
        out: list[Any] = []
        base = len(self._buf)
        self._buf += chunk
        buf = self._buf
        i = base
        n = len(buf)
        while i < n:
            c = buf[i]
            if self._in_str:
                if self._esc:
                    self._esc = False
                elif c == 0x5C:  # backslash
                    self._esc = True
                elif c == 0x22:
                    self._in_str = False
            elif c == 0x22:
                self._in_str = True
            elif c in (0x7B, 0x5B):  # { [
                if not self._top_seen and c == 0x5B:
                    self._top_seen = True  # the outer array
                else:
                    self._top_seen = True
                    if self._depth == 0:
                        self._start = i
                    self._depth += 1
            elif c in (0x7D, 0x5D) and self._depth > 0:  # } ]
                self._depth -= 1
                if self._depth == 0 and self._start >= 0:
                    try:
                        out.append(json.loads(bytes(buf[self._start : i + 1])))
                    except ValueError:
                        self.invalid += 1
                    self._start = -1
            i += 1
        keep_from = self._start if self._start >= 0 else n
        del buf[:keep_from]
        if self._start >= 0:
            self._start = 0
        if len(buf) > self.max_bytes:
            buf.clear()
            self._start, self._depth, self._in_str, self._esc = -1, 0, False, False
            self.oversized += 1
        return out


@dataclass(slots=True)
class EventStreamMessage:
    headers: dict[str, Any]
    payload: bytes

    @property
    def message_type(self) -> str:
        return str(self.headers.get(":message-type", ""))

    @property
    def event_type(self) -> str:
        return str(self.headers.get(":event-type") or self.headers.get(":exception-type") or "")


class EventStreamError(ValueError):
    pass


_PRELUDE = struct.Struct(">III")


class EventStreamDecoder:
    """``application/vnd.amazon.eventstream`` (Bedrock): prelude, headers, payload, CRC32s checked.

    A frame with a bad CRC or an impossible length raises :class:`EventStreamError` (the caller
    stops parsing that call; the bytes still flow).
    """

    MAX_MESSAGE = 24 * 1024 * 1024 + 128 * 1024 + 16

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[EventStreamMessage]:
        self._buf += chunk
        out: list[EventStreamMessage] = []
        while len(self._buf) >= 12:
            total, hlen, pcrc = _PRELUDE.unpack_from(self._buf, 0)
            if zlib.crc32(bytes(self._buf[:8])) != pcrc:
                raise EventStreamError("event-stream prelude CRC mismatch")
            if total < 16 or total > self.MAX_MESSAGE or hlen > total - 16:
                raise EventStreamError(f"event-stream message length {total} out of range")
            if len(self._buf) < total:
                break
            msg = bytes(self._buf[:total])
            del self._buf[:total]
            (mcrc,) = struct.unpack_from(">I", msg, total - 4)
            if zlib.crc32(msg[:-4]) != mcrc:
                raise EventStreamError("event-stream message CRC mismatch")
            out.append(EventStreamMessage(_headers(msg[12 : 12 + hlen]), msg[12 + hlen : total - 4]))
        return out


def _headers(raw: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i = 0
    while i < len(raw):
        nlen = raw[i]
        name = raw[i + 1 : i + 1 + nlen].decode("utf-8", "replace")
        i += 1 + nlen
        htype = raw[i]
        i += 1
        value: Any
        if htype in (0, 1):
            value = htype == 0
        elif htype == 2:
            value, i = raw[i], i + 1
        elif htype == 3:
            (value,), i = struct.unpack_from(">h", raw, i), i + 2
        elif htype == 4:
            (value,), i = struct.unpack_from(">i", raw, i), i + 4
        elif htype in (5, 8):
            (value,), i = struct.unpack_from(">q", raw, i), i + 8
        elif htype in (6, 7):
            (ln,) = struct.unpack_from(">H", raw, i)
            data = raw[i + 2 : i + 2 + ln]
            value = data.decode("utf-8", "replace") if htype == 7 else data
            i += 2 + ln
        elif htype == 9:
            value, i = raw[i : i + 16].hex(), i + 16
        else:
            raise EventStreamError(f"unknown event-stream header type {htype}")
        out[name] = value
    return out


def encode_event(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message with string headers (for the mock provider and tests)."""
    hb = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
        for k, v in headers.items()
    )
    total = 12 + len(hb) + len(payload) + 4
    prelude = struct.pack(">II", total, len(hb))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + hb + payload
    return body + struct.pack(">I", zlib.crc32(body))
