"""Raw WebSocket frames for hostile-traffic tests: what a hostile peer sends, and a client that sees every byte.

:class:`FrameWriter` builds one side's frames (masked for a client), compressing text messages
with permessage-deflate in one context that carries over from message to message, as browsers and
most libraries do; it also builds the hostile messages of issue #26: a deflate bomb (a ~1 MB message
inflating to 1 GiB), a message of endless fragments, one huge frame — streamed in pieces, never held.
Whatever reads them uses :class:`~llmtap.decode.wsframes.MessageReader` (bounded) rather than a
library that would inflate a bomb whole. :class:`RawWebSocket` is the client end: wsproto for the
handshake, raw frames after it, and a hash of every byte each way (the relay must change none).
"""

from __future__ import annotations

import hashlib
import os
import ssl
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import wsproto
from wsproto.events import AcceptConnection, RejectConnection, Request
from wsproto.extensions import PerMessageDeflate

from ..decode.wsframes import Closed, Event, GaveUp, Message, MessageReader, Unparsed
from .rawclient import tls_socket

HostileKind = Literal["deflate", "fragments", "frame"]
MIB = 1 << 20
_ZEROS = bytes(MIB)
_TAIL = b"\x00\x00\xff\xff"


def deflate_bomb(mib: int) -> bytes:
    """A permessage-deflate payload (sync-flush tail stripped) inflating to ``mib`` MiB of zeros.

    Built from two blocks: the first MiB as a fresh compressor writes it (a literal zero, then
    back-references of distance 1), then the same second block over and over. It refers only to
    itself, so it is valid whatever the receiver's compression context holds."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(_ZEROS) + c.flush(zlib.Z_SYNC_FLUSH)
    rest = c.compress(_ZEROS) + c.flush(zlib.Z_SYNC_FLUSH)
    return (first + rest * (mib - 1))[: -len(_TAIL)]


class FrameWriter:
    """One side's frames: ``masked`` for a client; ``deflate``: text messages compressed (one context)."""

    def __init__(self, masked: bool, deflate: bool) -> None:
        self.masked = masked
        self._c = zlib.compressobj(6, zlib.DEFLATED, -15) if deflate else None

    def _header(self, opcode: int, length: int, fin: bool = True, rsv1: bool = False) -> tuple[bytes, bytes]:
        b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
        m = 0x80 if self.masked else 0
        if length < 126:
            head = bytes([b0, m | length])
        elif length < 1 << 16:
            head = bytes([b0, m | 126]) + length.to_bytes(2, "big")
        else:
            head = bytes([b0, m | 127]) + length.to_bytes(8, "big")
        key = os.urandom(4) if self.masked else b""
        return head + key, key

    @staticmethod
    def _mask(data: bytes, key: bytes) -> bytes:
        if not key:
            return data
        n = len(data)
        return (int.from_bytes(data, "little") ^ int.from_bytes((key * (n // 4 + 1))[:n], "little")).to_bytes(
            n, "little"
        )

    def frame(self, opcode: int, payload: bytes, fin: bool = True, rsv1: bool = False) -> bytes:
        head, key = self._header(opcode, len(payload), fin, rsv1)
        return head + self._mask(payload, key)

    def text(self, message: str) -> bytes:
        data = message.encode()
        if self._c is None:
            return self.frame(1, data)
        z = self._c.compress(data) + self._c.flush(zlib.Z_SYNC_FLUSH)
        return self.frame(1, z[: -len(_TAIL)], rsv1=True)

    def fragments(self, message: str, n: int) -> list[bytes]:
        """One text message as ``n`` frames (compressed once, its payload cut; RSV1 on the first frame only)."""
        data = message.encode()
        if self._c is not None:
            data = (self._c.compress(data) + self._c.flush(zlib.Z_SYNC_FLUSH))[: -len(_TAIL)]
        size = -(-len(data) // n)
        pieces = [data[i : i + size] for i in range(0, len(data), size)]
        last = len(pieces) - 1
        return [
            self.frame(0 if i else 1, piece, fin=i == last, rsv1=self._c is not None and i == 0)
            for i, piece in enumerate(pieces)
        ]

    def close(self, code: int = 1000) -> bytes:
        return self.frame(8, code.to_bytes(2, "big"))

    def hostile(self, kind: HostileKind, mib: int) -> Iterator[bytes]:
        """The pieces of one hostile message, to be written one after the other (never joined)."""
        if kind == "deflate":
            assert self._c is not None, "a deflate bomb needs permessage-deflate"
            yield self.frame(2, deflate_bomb(mib), rsv1=True)
            # the receiver's window now ends in zeros: so must the compressor's (its output is not sent)
            self._c.compress(bytes(32 * 1024))
            self._c.flush(zlib.Z_SYNC_FLUSH)
        elif kind == "fragments":
            for i in range(mib):
                head, key = self._header(2 if i == 0 else 0, MIB, fin=i == mib - 1)
                yield head + self._mask(_ZEROS, key)
        else:  # one frame of mib MiB, the mask key all zeros so that the payload needs no masking
            head, _ = self._header(2, mib * MIB)
            yield head[:-4] + bytes(4) if self.masked else head
            for _ in range(mib):
                yield _ZEROS


def reader(deflate: bool) -> MessageReader:
    """A reader that never holds a large message but inflates anything (to stay in the compression context)."""
    return MessageReader(MIB, deflate=deflate, max_inflate=1 << 62, max_backlog=1 << 62)


def drain(r: MessageReader) -> list[Event]:
    """Everything ``r`` has, a MiB of output at a time (a bomb is never inflated into one buffer)."""
    events = r.drain(MIB)
    while r.pending():
        events += r.drain(MIB)
    return events


class RawWebSocket:
    """A client WebSocket through the proxy, with permessage-deflate offered (context takeover both ways)."""

    def __init__(
        self, host: str, path: str, headers: dict[str, str], cafile: Path, proxy: tuple[str, int] | None
    ) -> None:
        self.sock: ssl.SSLSocket = tls_socket(host, 443, cafile, proxy)
        hs = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        extra = [(k.encode(), v.encode()) for k, v in headers.items()]
        self.sock.sendall(
            hs.send(Request(host=host, target=path, extra_headers=extra, extensions=[PerMessageDeflate()]))
        )
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed during the WebSocket handshake")
            hs.receive_data(data)
            got = [e for e in hs.events() if isinstance(e, (AcceptConnection, RejectConnection))]
            if got:
                break
        if not isinstance(got[0], AcceptConnection):
            raise ConnectionError(f"WebSocket refused: {got[0]}")
        self.deflate = any(isinstance(e, PerMessageDeflate) for e in got[0].extensions)
        self.out = FrameWriter(masked=True, deflate=self.deflate)
        self._in = reader(self.deflate)
        self.sent = hashlib.sha256()
        self.received = hashlib.sha256()
        self.received_bytes = 0
        self.unparsed: list[Unparsed] = []  # messages over the reader's bound (the hostile ones)

    def send(self, data: bytes) -> None:
        self.sent.update(data)
        self.sock.sendall(data)

    def recv(self) -> list[Event]:
        """Events from the next read (``[]`` at the end of the connection)."""
        try:
            data = self.sock.recv(1 << 18)
        except (TimeoutError, ConnectionError, ssl.SSLError):
            data = b""
        if not data:
            return []
        self.received.update(data)
        self.received_bytes += len(data)
        self._in.feed(data)
        events = drain(self._in)
        self.unparsed += [e for e in events if isinstance(e, Unparsed)]
        return events or [Message(False, b"")]  # a read with no whole message yet

    def until(self, *types: str) -> list[str]:
        """Text messages until one whose JSON ``type`` is among ``types``."""
        got: list[str] = []
        while True:
            events = self.recv()
            if not events:
                raise ConnectionError(f"closed before {types}: {got[-3:]}")
            for ev in events:
                if isinstance(ev, Message) and ev.text:
                    got.append(ev.payload.decode())
                    if any(f'"type":"{t}"' in got[-1] for t in types):
                        return got
                elif isinstance(ev, GaveUp):
                    raise AssertionError(ev.why)

    def close(self) -> list[Closed]:
        """Send a close, read to the end of the connection; the close frames that came back."""
        self.send(self.out.close())
        seen: list[Closed] = []
        while events := self.recv():
            seen += [e for e in events if isinstance(e, Closed)]
        self.sock.close()
        return seen
