"""The guard's verdicts, remembered: a query text checked once is not parsed again.

:meth:`llmtap.admin.sqlguard.Guard.check` is deterministic for one guard (its parser, its database, the
shipped function list and the engine's names, each read once), and each check costs two engine round trips
(for the embedded store, IPC calls into the chDB engine process) before the read itself. The viewer issues
the same panel SQL over and over (values are bound as query parameters, so the text repeats), so the guard
keeps its last verdicts here: bounded by entries and by the characters they hold, least recently used out
first, safe to share between the admin server's threads. A text longer than :attr:`VerdictCache.max_text`
is simply not kept (one such query would push out many panel queries).

Only verdicts go in: an accepted statement, or the message of a refusal. An error that means the store did
not answer is not a verdict and never reaches the cache (the guard re-raises it before).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    """A query the guard refused: the message its :class:`~llmtap.admin.sqlguard.QueryRefused` carried."""

    message: str


class VerdictCache[V]:
    """Query text → verdict, least recently used first out, within ``max_entries`` and ``max_chars``."""

    def __init__(self, max_entries: int = 2048, max_chars: int = 8 * 1024 * 1024, max_text: int = 64 * 1024) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars  # the query texts plus what their verdicts hold (canonical text, message)
        self.max_text = max_text
        self._items: OrderedDict[str, tuple[V, int]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> V | None:
        with self._lock:
            hit = self._items.get(text)
            if hit is None:
                return None
            self._items.move_to_end(text)
            return hit[0]

    def put(self, text: str, verdict: V, verdict_chars: int) -> None:
        """Keep ``verdict`` for ``text``; ``verdict_chars`` is what it holds besides the text."""
        size = len(text) + verdict_chars
        if len(text) > self.max_text or size > self.max_chars:
            return
        with self._lock:
            old = self._items.pop(text, None)
            if old is not None:
                self._chars -= len(text) + old[1]
            self._items[text] = (verdict, verdict_chars)
            self._chars += size
            while len(self._items) > self.max_entries or self._chars > self.max_chars:
                k, (_, n) = self._items.popitem(last=False)
                self._chars -= len(k) + n

    def __len__(self) -> int:
        return len(self._items)

    @property
    def chars(self) -> int:
        """The characters held now (texts and verdicts)."""
        return self._chars
