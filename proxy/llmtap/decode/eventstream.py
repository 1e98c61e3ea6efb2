"""AWS ``application/vnd.amazon.eventstream`` (Bedrock): prelude, headers, payload, CRC32s checked."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any

from ..errors import LlmtapError


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


class EventStreamError(LlmtapError, ValueError):
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

    def release(self) -> None:
        """Drop what is buffered (the call stopped being parsed)."""
        self._buf = bytearray()

    def flush(self) -> list[EventStreamMessage]:
        return []  # a partial message at the end is not a message


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
