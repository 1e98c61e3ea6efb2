"""The durable spool: every finished record is on disk before a store write is tried.

Layout: ``<data-dir>/spool/<seq>.jsonl`` segments (one ``otel_traces`` row per line)
and, beside each, ``<seq>.ack`` with one line per batch: ``B first count`` before the
batch is sent, ``A first count`` once the store acknowledged it. The writer sends one
batch at a time, in order, so a segment's state is "acked up to N" plus at most one
begun batch. A batch's deduplication token is ``<seq>:<first>:<count>``: after a crash
the begun batch is re-sent with the same rows and token, and the store drops it if it
already has it — nothing is lost and nothing is stored twice.

Durability: each record is written to the OS (``write`` + ``flush``) before
:meth:`append` returns, so killing the process (SIGKILL) loses nothing appended; the
files are ``fsync``-ed at most every ``fsync_interval`` (1 s), which bounds what a
machine crash can lose. The spool is bounded: past ``max_bytes`` the oldest segment is
dropped, counted and logged.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("llmtap.spool")


@dataclass(slots=True)
class Batch:
    seq: int
    first: int
    rows: list[bytes]
    token: str
    end_offset: int  # byte offset in the segment after the batch's last row


class _Segment:
    __slots__ = ("ack_fh", "acked", "acked_offset", "bytes", "lines", "path", "pending", "seq")

    def __init__(self, path: Path, seq: int) -> None:
        self.path = path
        self.seq = seq
        self.lines = 0  # complete lines in the file
        self.bytes = 0
        self.acked = 0  # rows [0, acked) are in the store
        self.acked_offset = 0  # byte offset of row `acked`
        self.pending: tuple[int, int] | None = None  # (first, count) begun, not acked
        self.ack_fh = open(path.with_suffix(".ack"), "ab")  # noqa: SIM115 - closed in close()

    def close(self) -> None:
        self.ack_fh.close()


class Spool:
    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = 1 << 30,
        segment_bytes: int = 8 << 20,
        fsync_interval: float = 1.0,
        on_drop: Callable[[str, int], None] | None = None,
    ) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.fsync_interval = fsync_interval
        self._on_drop = on_drop
        self._lock = threading.Lock()
        self._segments: list[_Segment] = []
        self._last_fsync = time.monotonic()
        self._recover()
        self._active = self._segments[-1] if self._segments else self._new_segment()
        self._fh = open(self._active.path, "ab")  # noqa: SIM115 - closed in close()

    # -- recovery ------------------------------------------------------------------
    def _recover(self) -> None:
        for path in sorted(self.dir.glob("*.jsonl")):
            seg = _Segment(path, int(path.stem))
            data = path.read_bytes()
            end = data.rfind(b"\n") + 1
            if end < len(data):  # a torn last line (crash mid-write): drop it
                with open(path, "r+b") as f:
                    f.truncate(end)
                data = data[:end]
            seg.lines = data.count(b"\n")
            seg.bytes = len(data)
            self._read_acks(seg)
            seg.acked_offset = _offset_of_line(data, seg.acked)
            self._segments.append(seg)
        done = [s for s in self._segments[:-1] if s.acked >= s.lines and s.pending is None]
        for seg in done:
            self._delete(seg)
        if self._segments:
            n = sum(s.lines - s.acked for s in self._segments)
            if n:
                log.info("spool: %d records from a previous run will be replayed", n)

    @staticmethod
    def _read_acks(seg: _Segment) -> None:
        try:
            text = seg.path.with_suffix(".ack").read_text()
        except FileNotFoundError:
            return
        for line in text.splitlines():
            parts = line.split()
            if len(parts) != 3 or parts[0] not in ("A", "B"):
                continue  # a torn line
            first, count = int(parts[1]), int(parts[2])
            if parts[0] == "B":
                seg.pending = (first, count)
            elif first == seg.acked:
                seg.acked = first + count
                if seg.pending == (first, count):
                    seg.pending = None

    def _new_segment(self) -> _Segment:
        seq = (self._segments[-1].seq + 1) if self._segments else int(time.time() * 1000)
        seg = _Segment(self.dir / f"{seq:015d}.jsonl", seq)
        seg.path.touch()
        self._segments.append(seg)
        return seg

    # -- producer side ---------------------------------------------------------------
    def append(self, line: bytes) -> None:
        """Append one record (a JSON line without the newline); durable against SIGKILL on return."""
        data = line + b"\n"
        with self._lock:
            if self._active.bytes >= self.segment_bytes:
                self._fh.close()
                self._active = self._new_segment()
                self._fh = open(self._active.path, "ab")  # noqa: SIM115
            self._fh.write(data)
            self._fh.flush()
            self._active.lines += 1
            self._active.bytes += len(data)
            self._enforce_bound()

    def _enforce_bound(self) -> None:
        while self.total_bytes() > self.max_bytes and len(self._segments) > 1:
            oldest = self._segments[0]
            lost = oldest.lines - oldest.acked
            log.error("spool over %d bytes: dropping the oldest segment with %d unsent records", self.max_bytes, lost)
            if self._on_drop and lost:
                self._on_drop("spool_full", lost)
            self._delete(oldest)

    # -- writer side --------------------------------------------------------------------
    def next_batch(self, max_rows: int) -> Batch | None:
        with self._lock:
            for seg in self._segments:
                if seg.pending is not None:
                    first, count = seg.pending
                    rows, end = self._read(seg, seg.acked_offset, count)
                    return Batch(seg.seq, first, rows, f"{seg.seq}:{first}:{count}", end)
                if seg.acked < seg.lines:
                    count = min(max_rows, seg.lines - seg.acked)
                    rows, end = self._read(seg, seg.acked_offset, count)
                    seg.pending = (seg.acked, len(rows))
                    seg.ack_fh.write(f"B {seg.acked} {len(rows)}\n".encode())
                    seg.ack_fh.flush()
                    return Batch(seg.seq, seg.acked, rows, f"{seg.seq}:{seg.acked}:{len(rows)}", end)
                if seg is not self._active and seg.acked >= seg.lines:
                    continue
        return None

    def _read(self, seg: _Segment, offset: int, count: int) -> tuple[list[bytes], int]:
        if seg is self._active:
            self._fh.flush()
        with open(seg.path, "rb") as f:
            f.seek(offset)
            rows = []
            pos = offset
            for _ in range(count):
                line = f.readline()
                if not line.endswith(b"\n"):
                    break
                rows.append(line[:-1])
                pos += len(line)
        return rows, pos

    def ack(self, batch: Batch) -> None:
        with self._lock:
            seg = next((s for s in self._segments if s.seq == batch.seq), None)
            if seg is None:
                return  # dropped by the size bound meanwhile
            seg.ack_fh.write(f"A {batch.first} {len(batch.rows)}\n".encode())
            seg.ack_fh.flush()
            seg.acked = batch.first + len(batch.rows)
            seg.acked_offset = batch.end_offset
            seg.pending = None
            if seg is not self._active and seg.acked >= seg.lines:
                self._delete(seg)

    def _delete(self, seg: _Segment) -> None:
        seg.close()
        for p in (seg.path, seg.path.with_suffix(".ack")):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        self._segments.remove(seg)

    def maybe_fsync(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_fsync < self.fsync_interval:
            return
        with self._lock:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            for seg in self._segments:
                seg.ack_fh.flush()
                os.fsync(seg.ack_fh.fileno())
            self._last_fsync = now

    # -- introspection -----------------------------------------------------------------------
    def unsent(self) -> int:
        with self._lock:
            return sum(s.lines - s.acked for s in self._segments)

    def total_bytes(self) -> int:
        return sum(s.bytes for s in self._segments)

    def close(self) -> None:
        self.maybe_fsync(force=True)
        with self._lock:
            self._fh.close()
            for seg in list(self._segments):
                seg.close()
            # A fully acked active segment is not needed across restarts.
            if self._active.acked >= self._active.lines and self._active.pending is None:
                for p in (self._active.path, self._active.path.with_suffix(".ack")):
                    try:
                        p.unlink()
                    except FileNotFoundError:
                        pass


def _offset_of_line(data: bytes, n: int) -> int:
    pos = 0
    for _ in range(n):
        nxt = data.find(b"\n", pos)
        if nxt < 0:
            return len(data)
        pos = nxt + 1
    return pos
