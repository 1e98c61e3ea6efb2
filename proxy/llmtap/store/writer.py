"""The store writer: one thread moving records from the durable spool into the store.

``submit`` encodes the row (RowBinary), appends it to the spool (on disk, never blocking on
the store) and returns. The writer thread sends batches in spool order: as soon as
``batch_size`` rows wait, otherwise once the oldest waiting row is ``linger`` seconds old —
ClickHouse prefers fewer, larger inserts (each insert makes a part per table and view, and
parts are merged in the background). ``flush`` sends what is waiting now. A failed insert is
retried with exponential backoff and jitter, the same batch with the same deduplication
token, while new records keep accumulating on disk.

A batch the store *rejects* (bytes that do not parse as RowBinary: resending cannot help)
would block the spool forever. The writer splits it in halves, each with a token derived from the batch's,
until the rejected rows are alone; those go to ``quarantine_dir`` (spool framing, nothing
lost) and are counted as dropped with reason ``store_rejected``. If the store goes away
midway, the retry splits the same way, so halves already stored are deduplicated by their
tokens.

Faults never stop the thread: a disk that cannot take a record (full, read-only, failing) keeps it in
a bounded memory backlog (:data:`MAX_BACKLOG_BYTES`; past it the oldest are dropped, counted as
``disk_full``) until the spool takes it again; any store or writer error is retried with backoff.
:meth:`StoreWriter.ok` is the truth for ``/healthz``: false while the store fails, while records wait
outside the spool, and from a dropped record until the next batch is stored; every fault is counted
by reason (``on_error``).
"""

from __future__ import annotations

import collections
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import rowbinary
from .backend import Backend
from .spool import Spool, frame

log = logging.getLogger("llmtap.store")

# ClickHouse error codes meaning "these bytes are not the RowBinary rows they claim to be":
# CANNOT_PARSE_INPUT_ASSERTION_FAILED, ATTEMPT_TO_READ_AFTER_EOF, CANNOT_READ_ALL_DATA, INCORRECT_DATA,
# TOO_LARGE_STRING_SIZE, CANNOT_PARSE_BOOL. Inserts read rows with llmtap's own structure (``input()``,
# ``file()``), so these come from the bytes alone. A cast the table refuses (TYPE_MISMATCH,
# CANNOT_PARSE_TEXT, ...: a changed schema) is not one: every row would be refused, so it is retried.
REJECTED_CODES = frozenset({27, 32, 33, 117, 131, 467})
MAX_BACKLOG_BYTES = 64 << 20  # records held in memory while the disk refuses them
_CODE_RE = re.compile(r"\bCode: (\d+)\b")


def _failure(e: BaseException) -> str:
    from .clickhouse import failure_text

    return failure_text(e)


def rejects_rows(e: BaseException) -> bool:
    """Whether the store refused the data itself (not: was unavailable, overloaded, misconfigured)."""
    m = _CODE_RE.search(str(e))
    return m is not None and int(m.group(1)) in REJECTED_CODES


class StoreWriter:
    def __init__(
        self,
        backend: Backend,
        spool: Spool,
        *,
        batch_size: int = 10_000,
        linger: float = 1.0,
        encode: rowbinary.Encoder = rowbinary.encode,
        quarantine_dir: Path | None = None,
        on_drop: Callable[[str, int], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        where: str = "",
    ) -> None:
        self.backend = backend
        self.where = where or "the store"  # the store's URL without its password, for the log
        self._on_error = on_error
        self._backlog: collections.deque[bytes] = collections.deque()
        self._backlog_bytes = 0
        self._backlog_lock = threading.Lock()
        self.disk_failing_since: float | None = None
        self.dropped_since_ok = False
        self.last_error = ""
        self.spool = spool
        self.quarantine_dir = quarantine_dir or spool.dir.parent / "quarantine"
        self._on_drop = on_drop
        self.quarantined = 0
        self.batch_size = batch_size
        self.linger = linger
        self.encode = encode
        self._wake = threading.Event()
        self._stop = False
        self._idle = False
        self._flushes = 0  # callers of flush() waiting: send without lingering
        self._flushes_lock = threading.Lock()
        self.written = 0
        # A store that did not answer at start is not ok until the first batch reaches it: said at once,
        # in the log and in /healthz's store_error.
        self.failing_since: float | None = None
        if not getattr(backend, "ready", True):
            self._unavailable(getattr(backend, "start_error", "") or "it did not answer", " at start")
        self._last_insert_ok: bool | None = None  # None: nothing written yet
        self._thread = threading.Thread(target=self._run, name="llmtap-store", daemon=True)
        self._thread.start()

    def submit(self, row: Mapping[str, Any]) -> None:
        self.submit_encoded(self.encode(row))

    def submit_encoded(self, data: bytes) -> None:
        """A row already in RowBinary (:func:`llmtap.store.rows.encode_record`): to the spool."""
        with self._backlog_lock:
            if self._backlog:  # the disk refused earlier records: these wait behind them, in order
                self._hold(data)
                return
            try:
                self.spool.append(data)
            except OSError as e:
                self._disk_failed(e)
                self._hold(data)
                return
        if self._idle or self.spool.unsent() >= self.batch_size:  # a full batch does not linger
            self._wake.set()

    def _hold(self, data: bytes) -> None:
        self._backlog.append(data)
        self._backlog_bytes += len(data)
        while self._backlog_bytes > MAX_BACKLOG_BYTES and self._backlog:
            self._backlog_bytes -= len(self._backlog.popleft())
            self.dropped_since_ok = True
            if self._on_drop is not None:
                self._on_drop("disk_full", 1)

    def _disk_failed(self, e: OSError) -> None:
        self._error("spool_write", e)
        if self.disk_failing_since is None:
            self.disk_failing_since = time.monotonic()
            log.error("cannot write the spool (%s): records wait in memory (up to %d MiB) and are retried",
                      e, MAX_BACKLOG_BYTES >> 20)  # fmt: skip

    def _unavailable(self, why: str, when: str = "") -> None:
        self.failing_since = time.monotonic()
        self._error("store_unavailable", RuntimeError(f"{self.where}: {why}"))
        log.warning("store %s unavailable%s (%s): records are kept in the spool and retried", self.where, when, why)

    def _error(self, reason: str, e: BaseException) -> None:
        self.last_error = f"{reason}: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}"
        if self._on_error is not None:
            try:
                self._on_error(reason)
            except Exception:
                pass

    def _drain_backlog(self) -> bool:
        """Move held records into the spool; False while the disk still refuses them."""
        with self._backlog_lock:
            while self._backlog:
                try:
                    self.spool.append(self._backlog[0])
                except OSError as e:
                    self._error("spool_write", e)
                    return False
                self._backlog_bytes -= len(self._backlog.popleft())
            if self.disk_failing_since is not None:
                log.info("spool writable again after %.1fs", time.monotonic() - self.disk_failing_since)
                self.disk_failing_since = None
        return True

    def ok(self) -> bool:
        """The store has everything it was given, or will get it from the spool: nothing failing, waiting
        outside the spool, or lost since the last stored batch."""
        return self.failing_since is None and self.disk_failing_since is None and not self.dropped_since_ok

    def queued(self) -> int:
        return self.spool.unsent() + len(self._backlog)

    def store_ok(self) -> bool | None:
        """``/healthz`` ``store_ok``: False while :meth:`ok` is not (the store fails, records wait outside the
        spool or were lost, a store away at start has not answered yet); else ``None`` until the first insert,
        then True."""
        if not self.ok():
            return False
        return self._last_insert_ok

    def _sleep(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def _run(self) -> None:
        while True:
            try:
                self._loop()
                return
            except Exception as e:  # never die: a fault is logged, counted, and the loop starts again
                self._error("writer", e)
                log.exception("store writer fault; retrying")
                time.sleep(1.0)

    def _loop(self) -> None:
        backoff = 0.5
        waiting_since: float | None = None  # when the oldest unsent row was first seen
        while True:
            if self._backlog and not self._drain_backlog():
                if self._stop:
                    log.error("the disk still refuses records at shutdown: %d held in memory are lost",
                              len(self._backlog))  # fmt: skip
                    return
                time.sleep(0.5)
            unsent = self.spool.unsent()
            if unsent == 0:
                waiting_since = None
                self.spool.maybe_fsync()
                if self._stop:
                    return
                self._idle = True
                if self.spool.unsent() == 0:  # a submit between the check and _idle = True
                    self._sleep(self.linger)
                self._idle = False
                continue
            if unsent < self.batch_size and not self._stop and not self._flushes:
                now = time.monotonic()
                waiting_since = waiting_since or now
                left = self.linger - (now - waiting_since)
                if left > 0:
                    self._sleep(left)
                    continue
            try:
                batch = self.spool.next_batch(self.batch_size)
            except OSError as e:  # the batch log could not be written: try again shortly
                self._error("spool_write", e)
                time.sleep(backoff)
                continue
            if batch is None:
                self._sleep(0.05)
                continue
            if not batch.rows:  # only damaged records (counted at start): step over them
                self.spool.ack(batch)
                continue
            try:
                rejected = self._insert(batch.rows, batch.token)
            except Exception as e:
                self._last_insert_ok = False
                if self.failing_since is None:
                    self._unavailable(_failure(e))
                else:
                    self._error("store_unavailable", e)
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
            self._last_insert_ok = True
            backoff = 0.5
            waiting_since = None
            self.dropped_since_ok = bool(self._backlog) and self.dropped_since_ok
            try:
                self.spool.ack(batch)
            except OSError as e:  # stored but not noted: sent again later, and deduplicated by its token
                self._error("spool_write", e)
                time.sleep(backoff)
                continue
            self.written += len(batch.rows) - rejected
            self.spool.maybe_fsync()

    def _insert(self, rows: list[bytes], token: str) -> int:
        """Insert ``rows``; rows the store rejects end in quarantine (their number is returned).
        Raises while the store is unavailable."""
        try:
            self.backend.insert_rows(rows, token)
            return 0
        except Exception as e:
            if not rejects_rows(e):
                raise
            if len(rows) == 1:
                self._quarantine(rows[0], token, e)
                return 1
        half = len(rows) // 2
        return self._insert(rows[:half], token + "a") + self._insert(rows[half:], token + "b")

    def _quarantine(self, row: bytes, token: str, e: BaseException) -> None:
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.quarantine_dir, 0o700)
        path = self.quarantine_dir / f"{token.replace(':', '-')}.rec"
        again = path.exists()  # a split redone after an outage: counted once
        with open(path, "wb") as f:
            f.write(frame(row))
            f.flush()
            os.fsync(f.fileno())
        if again:
            return
        self.quarantined += 1
        log.error("the store rejected a row (%s); kept in %s", str(e).splitlines()[0][:200], path)
        if self._on_drop is not None:
            self._on_drop("store_rejected", 1)

    def flush(self, timeout: float = 10.0) -> bool:
        """Send every record submitted before this call; True once the store has them."""
        mark = self.spool.mark()
        deadline = time.monotonic() + timeout
        with self._flushes_lock:
            self._flushes += 1
        try:
            while time.monotonic() < deadline:
                if self.spool.sent_through(mark):
                    return True
                self._wake.set()
                time.sleep(0.01)
            return self.spool.sent_through(mark)
        finally:
            with self._flushes_lock:
                self._flushes -= 1

    def close(self, timeout: float = 15.0) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(timeout)
        try:
            self.spool.close()
        except OSError as e:
            log.error("closing the spool failed (%s): the next start recovers it", e)
