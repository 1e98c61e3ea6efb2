"""Incremental, bounded decompression of bodies, for the side parser only.

mitmproxy hands the stream callable the bytes as they are on the wire, so a compressed body is
inflated here, chunk by chunk, without touching what is forwarded. A hostile or broken upstream
can send a few megabytes that inflate to gigabytes (a "decompression bomb"), so no decoder ever
inflates more than it is asked for: ``decode(data, limit)`` takes new input (kept, compressed, as
long as it is not needed) and returns at most ``limit`` bytes (``-1``: no limit); ``pending()``
says whether more output is ready without new input; ``flush(limit)`` is the end of the body.
zlib's ``max_length``/``unconsumed_tail``, brotli's ``output_buffer_limit`` and zstd's
``max_length`` (PEP 784's ``compression.zstd``) do the bounding inside the libraries.

:data:`DECODERS` maps a Content-Encoding token to its class and :func:`make_decoder` builds the
chain for a header (``gzip, br``: undone in reverse order, each layer bounded the same way).
"""

from __future__ import annotations

import sys
import zlib
from typing import Any, Protocol

from ..errors import LlmtapError

if sys.version_info >= (3, 14):  # pragma: no cover - the stdlib's, from 3.14
    from compression import zstd as _zstd
else:
    from backports import zstd as _zstd

NO_LIMIT = -1


class UnsupportedEncoding(LlmtapError, ValueError):
    pass


class ContentDecoder(Protocol):
    def decode(self, data: bytes, limit: int = NO_LIMIT) -> bytes: ...

    def pending(self) -> bool: ...

    def flush(self, limit: int = NO_LIMIT) -> bytes: ...


class _Zlib:
    """gzip and zlib-wrapped deflate (the 47 window bits accept both headers); raw deflate as a fallback."""

    def __init__(self, wbits: int = 47, raw_fallback: bool = False) -> None:
        self._obj: Any = zlib.decompressobj(wbits)
        self._tail = b""
        self._raw_fallback = raw_fallback
        self._started = False

    def decode(self, data: bytes, limit: int = NO_LIMIT) -> bytes:
        buf = self._tail + data if self._tail else data
        if limit == 0:
            self._tail = buf
            return b""
        if not buf or self._obj.eof:
            self._tail = b""
            return b""
        try:
            out = self._obj.decompress(buf, max(limit, 0))
        except zlib.error:
            if not self._raw_fallback or self._started:
                raise
            self._obj = zlib.decompressobj(-15)  # "deflate" sent raw, as some servers do
            out = self._obj.decompress(buf, max(limit, 0))
        self._started = True
        self._tail = self._obj.unconsumed_tail
        return bytes(out)

    def pending(self) -> bool:
        return bool(self._tail) and not self._obj.eof

    def flush(self, limit: int = NO_LIMIT) -> bytes:
        if limit < 0:
            return self.decode(b"") + self._obj.flush()
        return self.decode(b"", limit)


class GzipDecoder(_Zlib):
    def __init__(self) -> None:
        super().__init__(47)


class DeflateDecoder(_Zlib):
    """``deflate``: zlib-wrapped as the RFC says, or raw as some servers send it."""

    def __init__(self) -> None:
        super().__init__(47, raw_fallback=True)


class BrotliDecoder:
    def __init__(self) -> None:
        import brotli

        self._obj = brotli.Decompressor()
        self._queue: list[bytes] = []  # input the decoder cannot take until its output is drained
        self._extra = b""  # output past the limit (brotli's buffer grows by doubling): handed out next

    def decode(self, data: bytes, limit: int = NO_LIMIT) -> bytes:
        if data:
            self._queue.append(data)
        out: list[bytes] = [self._extra]
        got = len(self._extra)
        self._extra = b""
        while limit < 0 or got < limit:
            if self._obj.is_finished():
                self._queue.clear()
                break
            feed = b""
            if self._queue and self._obj.can_accept_more_data():
                feed = self._queue.pop(0)
            elif self._obj.can_accept_more_data():
                break  # nothing more to give it, nothing held back
            if limit >= 0:
                piece = bytes(self._obj.process(feed, output_buffer_limit=limit - got))
            else:
                piece = bytes(self._obj.process(feed))
            out.append(piece)
            got += len(piece)
            if not piece and not feed:
                break
        joined = b"".join(out)
        if 0 <= limit < len(joined):
            joined, self._extra = joined[:limit], joined[limit:]
        return joined

    def pending(self) -> bool:
        return bool(self._extra) or (
            not self._obj.is_finished() and (bool(self._queue) or not self._obj.can_accept_more_data())
        )

    def flush(self, limit: int = NO_LIMIT) -> bytes:
        return self.decode(b"", limit)


class ZstdDecoder:
    """zstd, frame after frame (RFC 8878 allows several in one body)."""

    def __init__(self) -> None:
        self._obj = _zstd.ZstdDecompressor()
        self._held = b""  # input given while asked for nothing

    def decode(self, data: bytes, limit: int = NO_LIMIT) -> bytes:
        if limit == 0:
            self._held += data
            return b""
        feed = self._held + data if self._held else data
        self._held = b""
        out: list[bytes] = []
        got = 0
        while True:
            if self._obj.eof:  # the next frame starts with what the last one left
                feed = self._obj.unused_data + feed
                self._obj = _zstd.ZstdDecompressor()
                if not feed:
                    break
            piece = self._obj.decompress(feed, (limit - got) if limit >= 0 else -1)
            feed = b""
            out.append(piece)
            got += len(piece)
            if 0 <= limit <= got:
                break
            if not self._obj.eof and (self._obj.needs_input or not piece):
                break
        return b"".join(out)

    def pending(self) -> bool:
        if self._held:
            return True
        if self._obj.eof:
            return bool(self._obj.unused_data)
        return not self._obj.needs_input

    def flush(self, limit: int = NO_LIMIT) -> bytes:
        return self.decode(b"", limit)


class MultiDecoder:
    """Several codings (``Content-Encoding: gzip, br``): undone in reverse order of application, each bounded."""

    STEP = 64 * 1024  # bytes a layer hands the next one at a time

    def __init__(self, children: list[ContentDecoder]) -> None:
        self.children = children

    def _pull(self, i: int, data: bytes, limit: int, final: bool) -> bytes:
        """Up to ``limit`` bytes out of layer ``i``, feeding it ``data`` and what the layers before it release."""
        child = self.children[i]
        if i == 0:
            return child.flush(limit) if final else child.decode(data, limit)
        out: list[bytes] = []
        got = 0
        piece = child.decode(b"", limit) if child.pending() else b""
        out.append(piece)
        got += len(piece)
        while limit < 0 or got < limit:
            upstream = self._pull(i - 1, data, self.STEP, final)
            data = b""
            if not upstream and not child.pending():
                break
            piece = child.decode(upstream, (limit - got) if limit >= 0 else NO_LIMIT)
            out.append(piece)
            got += len(piece)
            if not upstream and not piece:
                break  # no progress: nothing more until new input (or the flush below)
        if final and (limit < 0 or got < limit):
            out.append(child.flush((limit - got) if limit >= 0 else NO_LIMIT))
        return b"".join(out)

    def decode(self, data: bytes, limit: int = NO_LIMIT) -> bytes:
        return self._pull(len(self.children) - 1, data, limit, False)

    def pending(self) -> bool:
        return any(c.pending() for c in self.children)

    def flush(self, limit: int = NO_LIMIT) -> bytes:
        return self._pull(len(self.children) - 1, b"", limit, True)


DECODERS: dict[str, type[ContentDecoder]] = {
    "gzip": GzipDecoder,
    "x-gzip": GzipDecoder,
    "deflate": DeflateDecoder,
    "br": BrotliDecoder,
    "zstd": ZstdDecoder,
}


def make_decoder(content_encoding: str | None) -> ContentDecoder | None:
    """The decoder for a Content-Encoding header value, ``None`` for identity."""
    if not content_encoding:
        return None
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return None
    children: list[ContentDecoder] = []
    for coding in reversed(codings):
        cls = DECODERS.get(coding)
        if cls is None:
            raise UnsupportedEncoding(coding)
        children.append(cls())
    return children[0] if len(children) == 1 else MultiDecoder(children)


def decode_bounded(decoder: ContentDecoder | None, data: bytes, cap: int) -> tuple[bytes, bool]:
    """A whole body (a request's): at most ``cap`` decoded bytes; True when the body was longer."""
    if decoder is None:
        return (data, False) if len(data) <= cap else (b"", True)
    out = decoder.decode(data, cap + 1)
    if len(out) <= cap:
        out += decoder.flush(cap + 1 - len(out))
    return (out, False) if len(out) <= cap else (b"", True)
