"""What every mock provider module shares: the reply, wire helpers, fixed words and headers."""

from __future__ import annotations

import json
import random
import re
import string
import zlib
from collections.abc import Callable
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


# The ids every reply of a kind carries; ``x-mock-id`` makes them one request's own (see :func:`with_ids`).
FIXED_IDS = ("chatcmpl-mock123", "msg_mock01", "resp_mock456", "cmpl-mock789")
_ID = re.compile(rb"\breq_mock_\w+|" + "|".join(re.escape(i) for i in FIXED_IDS).encode())  # request ids: req_mock_*


def with_ids(reply: Reply, tag: str) -> Reply:
    """The reply with each fixed id (headers and body) suffixed by ``-tag``: distinct ids per request."""
    clean = re.sub(r"[^A-Za-z0-9_-]", "", tag)[:40]
    if not clean:
        return reply
    suffix = b"-" + clean.encode()

    def sub(m: re.Match[bytes]) -> bytes:
        return m.group(0) + suffix

    reply.headers = [(k, _ID.sub(sub, v.encode()).decode()) for k, v in reply.headers]
    reply.chunks = [_ID.sub(sub, c) for c in reply.chunks]
    return reply


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


_PAD = string.ascii_letters + string.digits


def obfuscation(body: dict[str, Any]) -> Callable[[], dict[str, str]]:
    """OpenAI's stream padding: every chat chunk and every Responses delta event carries ``obfuscation``, a
    random string of 1-16 characters that evens out the event sizes (a side-channel defence), unless the request
    set ``stream_options.include_obfuscation: false``. Only OpenAI's own API sends it (not Azure, not the
    OpenAI-compatible providers). The mock's padding is the same on every reply (seeded), so two replies to one
    request are byte-identical."""
    if body.get("_mock_provider") != "openai" or (body.get("stream_options") or {}).get("include_obfuscation") is False:
        return dict
    rng = random.Random(len(str(body.get("model", ""))))
    return lambda: {"obfuscation": "".join(rng.choices(_PAD, k=rng.randint(1, 16)))}
