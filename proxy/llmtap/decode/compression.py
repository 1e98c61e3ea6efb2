"""Incremental decompression of bodies, for the side parser only (the httpx ``ContentDecoder`` shape).

mitmproxy hands the stream callable the bytes as they are on the wire, so a compressed
stream is inflated here, chunk by chunk, without touching what is forwarded. Every decoder
has ``decode(bytes) -> bytes`` and ``flush() -> bytes``; :data:`DECODERS` maps a
Content-Encoding token to its class and :func:`make_decoder` builds the chain for a header.
"""

from __future__ import annotations

import zlib
from typing import Protocol


class UnsupportedEncoding(ValueError):
    pass


class ContentDecoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class GzipDecoder:
    """gzip (and zlib-wrapped deflate: the 47 window bits accept both headers)."""

    def __init__(self) -> None:
        self._obj = zlib.decompressobj(47)

    def decode(self, data: bytes) -> bytes:
        return self._obj.decompress(data)

    def flush(self) -> bytes:
        return self._obj.flush()


class DeflateDecoder:
    """``deflate``: zlib-wrapped as the RFC says, or raw as some servers send it."""

    def __init__(self) -> None:
        self._obj = zlib.decompressobj(47)
        self._first = True

    def decode(self, data: bytes) -> bytes:
        try:
            out = self._obj.decompress(data)
        except zlib.error:
            if not self._first:
                raise
            self._obj = zlib.decompressobj(-15)
            out = self._obj.decompress(data)
        self._first = False
        return out

    def flush(self) -> bytes:
        return self._obj.flush()


class BrotliDecoder:
    def __init__(self) -> None:
        import brotli

        self._obj = brotli.Decompressor()

    def decode(self, data: bytes) -> bytes:
        return bytes(self._obj.process(data))

    def flush(self) -> bytes:
        return b""


class ZstdDecoder:
    def __init__(self) -> None:
        import zstandard

        self._obj = zstandard.ZstdDecompressor().decompressobj()

    def decode(self, data: bytes) -> bytes:
        return bytes(self._obj.decompress(data))

    def flush(self) -> bytes:
        return b""


class MultiDecoder:
    """Several codings (``Content-Encoding: gzip, br``): undone in reverse order of application."""

    def __init__(self, children: list[ContentDecoder]) -> None:
        self.children = children

    def decode(self, data: bytes) -> bytes:
        for child in self.children:
            data = child.decode(data)
        return data

    def flush(self) -> bytes:
        data = b""
        for child in self.children:  # what one layer releases at the end still passes the next
            data = (child.decode(data) if data else b"") + child.flush()
        return data


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
