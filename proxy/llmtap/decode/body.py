"""A whole (non-stream) JSON body, kept up to a cap and parsed once at the end."""

from __future__ import annotations

import json
from typing import Any


class BodyTooLarge(ValueError):
    pass


class JSONBody:
    """The framer of a plain JSON response: no frames while it arrives, the parsed value at ``flush``.

    A body larger than ``max_bytes`` raises :class:`BodyTooLarge` (the caller stops parsing
    that call; the bytes still flow). A body that is not JSON yields nothing.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[Any]:
        if len(self._buf) + len(chunk) > self.max_bytes:
            self._buf = bytearray()
            raise BodyTooLarge(f"body over {self.max_bytes >> 20} MiB: parsing stopped, bytes passed")
        self._buf += chunk
        return []

    def flush(self) -> list[Any]:
        if not self._buf:
            return []
        try:
            value = json.loads(self._buf)  # bytes-like: no second copy of a large body
        except ValueError:
            return []
        finally:
            self._buf = bytearray()
        return [value]
