"""Incremental content decoders."""

from __future__ import annotations

import gzip
import zlib
from typing import Any

import brotli
import pytest
import zstandard

from llmtap.decode.compression import make_decoder


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),
        ("br", brotli.compress),
        ("zstd", lambda b: zstandard.ZstdCompressor().compress(b)),
    ],
)
def test_incremental_decompression(encoding: str, compress: Any) -> None:
    raw = b"data: " + ("héllo " * 500).encode() + b"\n\n"
    blob = compress(raw)
    dec = make_decoder(encoding)
    assert dec is not None
    assert b"".join(dec.decode(blob[i : i + 7]) for i in range(0, len(blob), 7)) + dec.flush() == raw


def test_identity_and_unknown_encodings() -> None:
    assert make_decoder(None) is None and make_decoder("identity") is None
    with pytest.raises(ValueError):
        make_decoder("compress")
