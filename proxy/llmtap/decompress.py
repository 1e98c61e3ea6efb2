"""Incremental decompression of response bodies, for the side parser only.

mitmproxy hands the stream callable the bytes as they are on the wire, so a
compressed SSE stream must be inflated here, chunk by chunk, without touching
what is forwarded to the client.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

Decoder = Callable[[bytes], bytes]


class UnsupportedEncoding(ValueError):
    pass


def _zlib_decoder(wbits: int) -> Decoder:
    obj = zlib.decompressobj(wbits)
    state: dict[str, Any] = {"obj": obj, "first": True}

    def decode(data: bytes) -> bytes:
        try:
            out = state["obj"].decompress(data)
        except zlib.error:
            if not state["first"] or wbits == -15:
                raise
            # "deflate" is sometimes sent raw, without the zlib wrapper.
            state["obj"] = zlib.decompressobj(-15)
            out = state["obj"].decompress(data)
        state["first"] = False
        return bytes(out)

    return decode


def _brotli_decoder() -> Decoder:
    import brotli

    obj = brotli.Decompressor()

    def decode(data: bytes) -> bytes:
        return bytes(obj.process(data))

    return decode


def _zstd_decoder() -> Decoder:
    import zstandard

    obj = zstandard.ZstdDecompressor().decompressobj()

    def decode(data: bytes) -> bytes:
        return bytes(obj.decompress(data))

    return decode


_FACTORIES: dict[str, Callable[[], Decoder]] = {
    "gzip": lambda: _zlib_decoder(47),
    "x-gzip": lambda: _zlib_decoder(47),
    "deflate": lambda: _zlib_decoder(47),
    "br": _brotli_decoder,
    "zstd": _zstd_decoder,
}


def make_decoder(content_encoding: str | None) -> Decoder | None:
    """A chunk decoder for a Content-Encoding header value, ``None`` for identity."""
    if not content_encoding:
        return None
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return None
    decoders: list[Decoder] = []
    for coding in reversed(codings):  # applied in order listed, so undo in reverse
        factory = _FACTORIES.get(coding)
        if factory is None:
            raise UnsupportedEncoding(coding)
        decoders.append(factory())
    if len(decoders) == 1:
        return decoders[0]

    def chain(data: bytes) -> bytes:
        for d in decoders:
            data = d(data)
        return data

    return chain
