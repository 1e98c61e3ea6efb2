"""A streamed top-level JSON array, element by element (Gemini ``streamGenerateContent`` without alt=sse).

Pure, accepts any chunking, bounded: an element larger than ``max_bytes`` is dropped (counted in
``oversized``).
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_BYTES = 8 * 1024 * 1024


class JSONArrayDecoder:
    """Elements of a top-level JSON array as they complete (Gemini streamGenerateContent without alt=sse).

    Also accepts a bare object instead of an array (an error body) and yields it when complete.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._buf = bytearray()
        self._depth = 0  # depth inside the current element
        self._in_str = False
        self._esc = False
        self._start = -1
        self._top_seen = False
        self.max_bytes = max_bytes
        self.oversized = self.invalid = 0

    def feed(self, chunk: bytes) -> list[Any]:
        out: list[Any] = []
        base = len(self._buf)
        self._buf += chunk
        buf = self._buf
        i = base
        n = len(buf)
        while i < n:
            c = buf[i]
            if self._in_str:
                if self._esc:
                    self._esc = False
                elif c == 0x5C:  # backslash
                    self._esc = True
                elif c == 0x22:
                    self._in_str = False
            elif c == 0x22:
                self._in_str = True
            elif c in (0x7B, 0x5B):  # { [
                if not self._top_seen and c == 0x5B:
                    self._top_seen = True  # the outer array
                else:
                    self._top_seen = True
                    if self._depth == 0:
                        self._start = i
                    self._depth += 1
            elif c in (0x7D, 0x5D) and self._depth > 0:  # } ]
                self._depth -= 1
                if self._depth == 0 and self._start >= 0:
                    try:
                        out.append(json.loads(bytes(buf[self._start : i + 1])))
                    except ValueError:
                        self.invalid += 1
                    self._start = -1
            i += 1
        keep_from = self._start if self._start >= 0 else n
        del buf[:keep_from]
        if self._start >= 0:
            self._start = 0
        if len(buf) > self.max_bytes:
            buf.clear()
            self._start, self._depth, self._in_str, self._esc = -1, 0, False, False
            self.oversized += 1
        return out

    def release(self) -> None:
        """Drop what is buffered (the call stopped being parsed)."""
        self._buf = bytearray()

    def flush(self) -> list[Any]:
        return []
