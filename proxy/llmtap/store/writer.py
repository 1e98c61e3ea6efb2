"""The store writer: a thread that batches finished records into the store.

``submit`` never blocks the caller. Batches are bounded in size and time; a
failed insert is retried with exponential backoff and jitter while newer records
keep queueing (bounded: past ``max_queue`` the oldest are dropped and counted).
"""

from __future__ import annotations

import collections
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from . import Backend

log = logging.getLogger("llmtap.store")


class StoreWriter:
    def __init__(
        self,
        backend: Backend,
        *,
        batch_size: int = 500,
        flush_interval: float = 0.2,
        max_queue: int = 200_000,
        on_drop: Callable[[str, int], None] | None = None,
    ) -> None:
        self.backend = backend
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.max_queue = max_queue
        self._on_drop = on_drop
        self._q: collections.deque[dict[str, Any]] = collections.deque()
        self._cv = threading.Condition()
        self._stop = False
        self._inflight = 0
        self.written = 0
        self._thread = threading.Thread(target=self._run, name="llmtap-store", daemon=True)
        self._thread.start()

    def submit(self, row: dict[str, Any]) -> None:
        with self._cv:
            if len(self._q) >= self.max_queue:
                self._q.popleft()
                if self._on_drop:
                    self._on_drop("store_queue_full", 1)
            self._q.append(row)
            if len(self._q) >= self.batch_size:
                self._cv.notify()

    def queued(self) -> int:
        with self._cv:
            return len(self._q) + self._inflight

    def _run(self) -> None:
        backoff = 0.5
        while True:
            with self._cv:
                if not self._q and not self._stop:
                    self._cv.wait(self.flush_interval)
                if not self._q:
                    if self._stop:
                        return
                    continue
                if len(self._q) < self.batch_size and not self._stop:
                    self._cv.wait(self.flush_interval)  # let a batch gather, bounded in time
                n = min(len(self._q), self.batch_size)
                batch = [self._q.popleft() for _ in range(n)]
                self._inflight = n
            try:
                self.backend.insert_spans(batch)
                self.written += n
                backoff = 0.5
            except Exception as e:
                log.warning("store insert of %d rows failed (%s); retrying in %.1fs", n, e, backoff)
                with self._cv:
                    self._q.extendleft(reversed(batch))
                    stopping = self._stop
                if stopping and backoff > 8:
                    log.error("giving up on %d rows at shutdown", len(self._q))
                    if self._on_drop:
                        self._on_drop("store_unavailable_at_shutdown", len(self._q))
                    return
                time.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 30.0)
            finally:
                with self._cv:
                    self._inflight = 0

    def flush(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.queued() == 0:
                return True
            with self._cv:
                self._cv.notify()
            time.sleep(0.02)
        return self.queued() == 0

    def close(self, timeout: float = 15.0) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._thread.join(timeout)
