"""A hostile or broken upstream, for the security tests: decompression bombs, a cut body, echoed payloads.

- ``bomb_gzip2``: a JSON response, ``Content-Encoding: gzip, gzip``, inflating to 2 GiB of zeros
  (about 2 MB on the wire).
- ``bomb_br``: an SSE response, brotli, inflating to 2 GiB of real chat-completion chunks.
- ``bomb_zstd``: a JSON response, zstd, inflating to 2 GiB of zeros.
- ``truncated``: a JSON response whose ``Content-Length`` promises more than is sent before the
  connection closes; ``truncated_sse`` the same for a whole stream, its terminal event included.
- ``echo``: a 200 answer whose id, model and content are the request's ``x-mock-echo`` header, and
  ``echo_error`` a 400 whose error message, type and code are (what an upstream echoes back: planted
  secrets, markup for the XSS test); ``x-request-id`` carries it too.
- ``odd_headers``: a 200 answer whose headers no column can hold as they are (:data:`ODD_HEADERS`):
  non-finite and huge numbers, bytes that are not UTF-8.

Bombs are built once per process, in pieces (the inflated body never exists here either).
"""

from __future__ import annotations

import functools
import gzip
import json
import zlib
from typing import Any

from .common import CREATED, OPENAI_HEADERS, SSE_HEADERS, Reply, json_reply, sse

BOMB_BYTES = 2 << 30
SCENARIOS = frozenset(
    {"bomb_gzip2", "bomb_br", "bomb_zstd", "truncated", "truncated_sse", "echo", "echo_error", "odd_headers"}
)
# Sent as raw bytes: a surrogate escape stands for a byte that is not UTF-8 (\udcff: 0xff).
ODD_HEADERS = [
    ("x-ratelimit-remaining-requests", "1e309"),
    ("x-ratelimit-remaining-tokens", "NaN"),
    ("x-ratelimit-limit-requests", "9" * 5000),
    ("openai-processing-ms", "-inf"),
    ("retry-after-ms", "1e999"),
    ("x-request-id", "req-\udcff\udcfe-\udce9t\udce9"),
    ("x-ratelimit-reset-requests", "\udcc3\udca9t\udcc3\udca9 \udcff"),
]
_MIB = 1 << 20


@functools.cache
def _gzip_zeros() -> bytes:
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    block = bytes(_MIB)
    return b"".join([*(z.compress(block) for _ in range(BOMB_BYTES // _MIB)), z.flush()])


@functools.cache
def _zstd_zeros() -> bytes:
    import zstandard

    c = zstandard.ZstdCompressor(level=3).compressobj()
    block = bytes(_MIB)
    return b"".join([*(c.compress(block) for _ in range(BOMB_BYTES // _MIB)), c.flush()])


def _chunk_event() -> bytes:
    return sse(
        {
            "id": "chatcmpl-bomb",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}],
        }
    )


@functools.cache
def _brotli_events() -> bytes:
    import brotli

    event = _chunk_event()
    block = event * (_MIB // len(event))
    c = brotli.Compressor(quality=1)
    parts = [c.process(block) for _ in range(BOMB_BYTES // len(block))]
    return b"".join([*parts, c.finish()])


def reply(scenario: str, body: dict[str, Any], headers: dict[str, str]) -> Reply:
    if scenario == "bomb_gzip2":
        return Reply(200, [("content-type", "application/json"), ("content-encoding", "gzip, gzip")],
                     [gzip.compress(_gzip_zeros(), 1, mtime=0)])  # fmt: skip
    if scenario == "bomb_zstd":
        return Reply(200, [("content-type", "application/json"), ("content-encoding", "zstd")], [_zstd_zeros()])
    if scenario == "bomb_br":
        data = _brotli_events()
        chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
        return Reply(200, [*SSE_HEADERS, ("content-encoding", "br")], chunks, delay=0.0, stream=True)
    if scenario == "truncated":
        full = json.dumps({"id": "chatcmpl-cut", "object": "chat.completion", "model": "gpt-4o", "choices": []})
        sent = full.encode()[: len(full) // 2]
        return Reply(200, [("content-type", "application/json"), ("content-length", str(len(full)))], [sent],
                     close=True)  # fmt: skip
    if scenario == "truncated_sse":
        event = json.loads(_chunk_event().decode()[6:])
        done = {**event, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        events = sse(event) + sse(done) + sse("[DONE]")
        return Reply(200, [*SSE_HEADERS, ("content-length", str(len(events) + 100))], [events], close=True)
    if scenario == "odd_headers":
        answer = {"id": "chatcmpl-odd", "object": "chat.completion", "created": CREATED, "model": "gpt-4o",
                  "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}  # fmt: skip
        return json_reply(200, answer, ODD_HEADERS)
    payload = headers.get("x-mock-echo", "")
    header = [("x-request-id", payload)] if payload else []
    if scenario == "echo_error":
        err = {"error": {"message": payload, "type": payload, "code": payload, "param": None}}
        return json_reply(400, err, header)
    answer = {
        "id": payload,
        "object": "chat.completion",
        "created": CREATED,
        "model": payload,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": payload}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    return json_reply(200, answer, [*OPENAI_HEADERS[1:], *header])
