"""What every mock provider module shares: the reply, wire helpers, fixed words and headers."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

CREATED = 1764400000  # fixed: replies are byte-for-byte reproducible
WORDS = [
    "The",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "while",
    "llamas",
    "watch",
    "—",
    "naïve",
    "café",
    "日本語",
    "✓",
]


@dataclass
class Reply:
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)  # written one by one, `delay` apart
    delay: float = 0.005
    abort: bool = False  # close the connection instead of ending the body
    stamp: bool = False  # prefix each chunk with an SSE comment carrying the send time
    stamp_content: bool = False  # start each content delta's text with its send time (@<time>|)
    stream: bool = False  # chunked and paced even when the content type is not SSE
    close: bool = False  # close the connection (cleanly) after this reply


# -- wire helpers ---------------------------------------------------------------------


def sse(obj: Any, event: str | None = None, eol: str = "\n") -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}{eol}" if event else ""
    return f"{head}data: {data}{eol}{eol}".encode()


def words(n: int) -> list[str]:
    return [(" " if i else "") + WORDS[i % len(WORDS)] for i in range(n)]


def json_reply(status: int, obj: Any, headers: list[tuple[str, str]] | None = None) -> Reply:
    body = json.dumps(obj).encode()
    return Reply(status, [("content-type", "application/json"), *(headers or [])], [body])


SSE_HEADERS = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]
OPENAI_HEADERS = [
    ("x-request-id", "req_mock_openai_1"),
    ("openai-processing-ms", "42"),
    ("x-ratelimit-remaining-requests", "4999"),
    ("x-ratelimit-remaining-tokens", "159000"),
]
ANTHROPIC_HEADERS = [
    ("request-id", "req_mock_anthropic_1"),
    ("anthropic-ratelimit-requests-remaining", "49"),
    ("anthropic-ratelimit-tokens-remaining", "39000"),
]


def shape(reply: Reply, scenario: str) -> Reply:
    """Apply the wire-level scenarios: compression, CRLF split, split UTF-8, pacing."""
    out: list[bytes] = []
    if scenario == "gzip":
        comp = zlib.compressobj(wbits=31)
        out = [comp.compress(c) + comp.flush(zlib.Z_SYNC_FLUSH) for c in reply.chunks]
        out.append(comp.flush())
        reply.chunks = out
        reply.headers = [*reply.headers, ("content-encoding", "gzip")]
    elif scenario == "crlf":
        # Split every event between its final CR and LF.
        for c in reply.chunks:
            out += [c[:-1], c[-1:]]
        reply.chunks = out
    elif scenario == "split_utf8":
        data = b"".join(reply.chunks)
        i = 0
        while i < len(data):
            j = min(i + 7, len(data))  # 7-byte slices cut through multi-byte characters
            out.append(data[i:j])
            i = j
        reply.chunks = out
        reply.delay = 0.001
    elif scenario == "paced":
        reply.stamp = True
        reply.delay = 0.3
    elif scenario == "slow":
        reply.delay = 0.2
    return reply
