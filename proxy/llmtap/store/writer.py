"""The store writer: one thread moving records from the durable spool into the store.

``submit`` appends the record to the spool (on disk, never blocking on the store) and
returns. The writer thread sends batches (bounded in rows and time) in spool order; a
failed insert is retried with exponential backoff and jitter, the same batch with the
same deduplication token, while new records keep accumulating on disk.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from typing import Any

from . import Backend
from .spool import Spool

log = logging.getLogger("llmtap.store")


class StoreWriter:
    def __init__(self, backend: Backend, spool: Spool, *, batch_size: int = 2000, flush_interval: float = 0.2) -> None:
        self.backend = backend
        self.spool = spool
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self._wake = threading.Event()
        self._stop = False
        self.written = 0
        self.failing_since: float | None = None
        self._thread = threading.Thread(target=self._run, name="llmtap-store", daemon=True)
        self._thread.start()

    def submit(self, row: dict[str, Any]) -> None:
        self.spool.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode())
        self._wake.set()

    def queued(self) -> int:
        return self.spool.unsent()

    def _run(self) -> None:
        backoff = 0.5
        while True:
            batch = self.spool.next_batch(self.batch_size)
            if batch is None or not batch.rows:
                self.spool.maybe_fsync()
                if self._stop:
                    return
                self._wake.wait(self.flush_interval)
                self._wake.clear()
                continue
            try:
                self.backend.insert_rows(batch.rows, batch.token)
            except Exception as e:
                if self.failing_since is None:
                    self.failing_since = time.monotonic()
                    log.warning("store unavailable (%s); records are kept in the spool and retried", e)
                if self._stop and backoff > 4:
                    log.error(
                        "store still unavailable at shutdown: %d records stay in the spool for the next start",
                        self.spool.unsent(),
                    )
                    return
                time.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 5.0)  # an insert attempt is cheap: notice a recovery fast
                continue
            if self.failing_since is not None:
                log.info("store back after %.1fs", time.monotonic() - self.failing_since)
                self.failing_since = None
            backoff = 0.5
            self.spool.ack(batch)
            self.written += len(batch.rows)
            self.spool.maybe_fsync()

    def flush(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.queued() == 0:
                return True
            self._wake.set()
            time.sleep(0.02)
        return self.queued() == 0

    def close(self, timeout: float = 15.0) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(timeout)
        self.spool.close()
