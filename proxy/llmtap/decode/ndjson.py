"""NDJSON: one JSON value per line (Ollama's ``application/x-ndjson``).

Pure, accepts any chunking, bounded: a line larger than ``max_bytes`` is dropped (counted in
``oversized``) and the decoder resynchronises at the next newline.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_BYTES = 8 * 1024 * 1024


class NDJSONDecoder:
    """One JSON value per line (Ollama's ``application/x-ndjson``). Unparseable lines are skipped."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._buf = bytearray()
        self.max_bytes = max_bytes
        self.oversized = self.invalid = 0
        self._discard = False

    def feed(self, chunk: bytes) -> list[Any]:
        self._buf += chunk
        out: list[Any] = []
        while (i := self._buf.find(b"\n")) >= 0:
            line = bytes(self._buf[:i]).strip()
            del self._buf[: i + 1]
            if self._discard:
                self._discard = False
                continue
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    self.invalid += 1
        if len(self._buf) > self.max_bytes:
            self._buf.clear()
            self._discard = True
            self.oversized += 1
        return out

    def release(self) -> None:
        """Drop what is buffered (the call stopped being parsed)."""
        self._buf = bytearray()

    def flush(self) -> list[Any]:
        return self.feed(b"\n")
