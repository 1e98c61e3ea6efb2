"""Request bodies of captured calls, parsed in the recorder.

The proxy streams every captured request body upstream as it arrives and keeps at most
:data:`~llmtap.handoff.MAX_REQUEST_BODY` bytes of it (``intercept/calls.py``: mitmproxy would
buffer it whole, and copy it once more: a 100 MiB upload cost ~0.9 GB). Here the kept body is parsed,
decompression included, with the same bounds as responses (a 1.6 KB brotli body that inflates to 1 GiB
stops at :data:`MAX_REQUEST_PARSE`). A body over the bound was still forwarded and counted; the call is
recorded without the body's fields, and says so.
"""

from __future__ import annotations

import json
from typing import Any

from ..decode.compression import UnsupportedEncoding, decode_bounded, make_decoder
from ..handoff import MAX_REQUEST_BODY

MAX_REQUEST_PARSE = MAX_REQUEST_BODY  # decoded bytes of a request body parsed at all: what the worker keeps


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
