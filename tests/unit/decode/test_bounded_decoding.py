"""Bounded decompression: any chunking and any per-call limit give back the body exactly, and a bomb
never inflates more than it is asked for (issue #19, findings 5 and 10)."""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib
from collections.abc import Callable

import brotli
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmtap.decode.compression import ContentDecoder, decode_bounded, make_decoder

COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": lambda b: brotli.compress(b, quality=5),
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
    "zstd-frames": lambda b: (
        zstandard.ZstdCompressor().compress(b[: len(b) // 2]) + zstandard.ZstdCompressor().compress(b[len(b) // 2 :])
    ),
    "gzip, gzip": lambda b: gzip.compress(gzip.compress(b)),
    "gzip, br": lambda b: brotli.compress(gzip.compress(b), quality=5),
    "br, zstd": lambda b: zstandard.ZstdCompressor().compress(brotli.compress(b, quality=5)),
}


def header(name: str) -> str:
    return "zstd" if name == "zstd-frames" else name


def drain(dec: ContentDecoder, blob: bytes, cuts: list[int], limit: int) -> bytes:
    out: list[bytes] = []
    pos = 0
    for cut in [*sorted({c % (len(blob) + 1) for c in cuts}), len(blob)]:
        piece = dec.decode(blob[pos:cut], limit)
        assert limit < 0 or len(piece) <= limit
        out.append(piece)
        pos = cut
        while dec.pending():
            piece = dec.decode(b"", limit)
            assert limit < 0 or len(piece) <= limit
            if not piece:
                break
            out.append(piece)
    while True:
        piece = dec.flush(limit)
        out.append(piece)
        if not piece:
            break
    return b"".join(out)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.one_of(st.binary(max_size=20_000), st.text(max_size=5_000).map(lambda s: s.encode() * 3)),
    cuts=st.lists(st.integers(min_value=0, max_value=100_000), max_size=12),
    limit=st.sampled_from([-1, 1, 7, 100, 4096, 65536]),
)
def test_any_chunking_and_limit_gives_the_body_back(name: str, data: bytes, cuts: list[int], limit: int) -> None:
    blob = COMPRESSORS[name](data)
    dec = make_decoder(header(name))
    assert dec is not None
    assert drain(dec, blob, cuts, limit) == data


def _bomb(name: str, size: int) -> bytes:
    """``size`` zero bytes compressed (built in pieces: the bomb itself never exists in memory)."""
    if name == "zstd":
        c = zstandard.ZstdCompressor().compressobj()
        parts = [c.compress(bytes(1 << 20)) for _ in range(size >> 20)]
        return b"".join([*parts, c.flush()])
    if name == "br":
        c = brotli.Compressor(quality=1)
        parts = [c.process(bytes(1 << 20)) for _ in range(size >> 20)]
        return b"".join([*parts, c.finish()])
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    inner = b"".join([*(z.compress(bytes(1 << 20)) for _ in range(size >> 20)), z.flush()])
    return gzip.compress(inner) if name == "gzip, gzip" else inner


@pytest.mark.parametrize("name", ["gzip", "gzip, gzip", "br", "zstd"])
def test_a_bomb_inflates_only_what_is_asked_for(name: str) -> None:
    blob = _bomb(name, 256 << 20)
    assert len(blob) < 2 << 20
    dec = make_decoder(name)
    assert dec is not None
    tracemalloc.start()
    t = time.monotonic()
    got = 0
    for i in range(0, len(blob), 16 * 1024):  # the wire chunks
        piece = dec.decode(blob[i : i + 16 * 1024], 256 * 1024)
        assert len(piece) <= 256 * 1024
        got += len(piece)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 16 << 20  # the 256 MiB never existed: the compressed input waits instead
    assert got <= (len(blob) // (16 * 1024) + 1) * (256 * 1024)
    assert time.monotonic() - t < 5


def test_decode_bounded_caps_a_whole_body() -> None:
    body = _bomb("gzip", 64 << 20)
    out, over = decode_bounded(make_decoder("gzip"), body, 1 << 20)
    assert over and out == b""
    small = gzip.compress(b'{"model": "gpt-4o"}')
    assert decode_bounded(make_decoder("gzip"), small, 1 << 20) == (b'{"model": "gpt-4o"}', False)
    assert decode_bounded(None, b"x" * 10, 5) == (b"", True)
