"""A whole (non-stream) JSON body, kept up to a cap and parsed once at the end."""

from __future__ import annotations

import json
from typing import Any, Protocol

from ..errors import LlmtapError


class BodyTooLarge(LlmtapError, ValueError):
    pass


class Budget(Protocol):
    """Bytes shared by every buffered body at once (the capture stage keeps one for all calls)."""

    def take(self, n: int) -> bool: ...

    def give(self, n: int) -> None: ...


class Bytes:
    """A :class:`Budget` of ``limit`` bytes for one thread or one event loop (no lock)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0

    def take(self, n: int) -> bool:
        if self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used = max(self.used - n, 0)


class JSONBody:
    """The framer of a plain JSON response: no frames while it arrives, the parsed value at ``flush``.

    A body larger than ``max_bytes`` raises :class:`BodyTooLarge` (the caller stops parsing
    that call; the bytes still flow). A body that is not JSON yields nothing.
    """

    def __init__(self, max_bytes: int, budget: Budget | None = None) -> None:
        self.max_bytes = max_bytes
        self.budget = budget  # also bounded by what every body buffered at once may hold
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[Any]:
        if len(self._buf) + len(chunk) > self.max_bytes:
            self.release()
            raise BodyTooLarge(f"body over {self.max_bytes >> 20} MiB: parsing stopped, bytes passed")
        if self.budget is not None and not self.budget.take(len(chunk)):
            self.release()
            raise BodyTooLarge("the bodies being parsed fill their shared bound: parsing stopped, bytes passed")
        self._buf += chunk
        return []

    def release(self) -> None:
        """Give back what the body holds (a call dropped, or stopped being parsed, before its end)."""
        if self.budget is not None and self._buf:
            self.budget.give(len(self._buf))
        self._buf = bytearray()

    def flush(self) -> list[Any]:
        if not self._buf:
            return []
        try:
            value = json.loads(self._buf)  # bytes-like: no second copy of a large body
        except ValueError:
            return []
        finally:
            self.release()
        return [value]
