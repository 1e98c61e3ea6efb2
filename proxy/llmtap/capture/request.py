"""Request bodies of captured calls: streamed to the upstream as they arrive, kept only up to a bound.

mitmproxy buffers a request body whole before the ``request`` hook (and copies it once more at its
end); a 100 MiB upload cost ~0.9 GB and a parse on the event loop. Instead every request llmtap
captures is streamed (``flow.request.stream`` = a :class:`RequestBody`): chunks pass unchanged, its
size and hash are counted on the way, and at most :data:`MAX_REQUEST_PARSE` bytes are kept for the
parser. Parsing (decompression included, with the same bounds as responses: a 1.6 KB brotli body
that inflates to 1 GiB stops at the cap) runs off the loop when the body is large. A body over the
bound is still forwarded and counted; the call is recorded without the body's fields, and says so.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..decode.compression import UnsupportedEncoding, decode_bounded, make_decoder

MAX_REQUEST_PARSE = 32 * 1024 * 1024  # decoded bytes of a request body parsed at all
LOOP_PARSE = 256 * 1024  # larger bodies are parsed on a worker thread, not the event loop


class RequestBody:
    """The ``flow.request.stream`` callable: returns each chunk unchanged, always."""

    __slots__ = ("buf", "over", "sha", "size")

    def __init__(self) -> None:
        self.buf: bytearray | None = bytearray()
        self.size = 0
        self.over = False
        self.sha = hashlib.sha256()

    def __call__(self, data: bytes) -> bytes:
        if data:
            self.size += len(data)
            self.sha.update(data)
            buf = self.buf
            if buf is not None:
                if len(buf) + len(data) > MAX_REQUEST_PARSE:
                    self.buf, self.over = None, True
                else:
                    buf += data
        return data

    def digest(self) -> str:
        return self.sha.hexdigest()[:32] if self.size else ""


def parse_body(raw: bytes | bytearray | None, content_encoding: str) -> tuple[Any, str]:
    """(the JSON value or None, why it was not parsed: '' when it was or when it is not JSON)."""
    if raw is None:
        return None, f"request body over {MAX_REQUEST_PARSE >> 20} MiB: not parsed"
    if not raw:
        return None, ""
    data: bytes | bytearray = raw
    if content_encoding.strip() and content_encoding.strip().lower() != "identity":
        try:
            data, over = decode_bounded(make_decoder(content_encoding), bytes(raw), MAX_REQUEST_PARSE)
        except (UnsupportedEncoding, ValueError, OSError) as e:
            return None, f"request body not decoded ({type(e).__name__}: {e})"[:300]
        except Exception as e:  # zlib.error, brotli.error, ZstdError: a broken body
            return None, f"request body not decoded ({type(e).__name__})"
        if over:
            return None, f"request body over {MAX_REQUEST_PARSE >> 20} MiB decoded: not parsed"
    try:
        return json.loads(data), ""
    except ValueError:
        return None, ""
