"""The durable spool: every finished record is on disk before a store write is tried.

Layout: ``<data-dir>/spool/<seq>.rec`` segments, each a run of records framed as
``<u32 length><u32 crc32><payload>`` (little-endian; the payload is the writer's encoding,
an ``otel_traces`` row in RowBinary), and beside each ``<seq>.ack`` with one line per batch:
``B first count`` before the batch is sent, ``A first count`` once the store acknowledged it.
The writer sends one batch at a time, in order, so a segment's state is "acked up to N" plus
at most one begun batch. A batch's deduplication token is ``<seq>:<first>:<count>``: after a
crash the begun batch is re-sent with the same rows and token, and the store drops it if it
already has it — nothing is lost and nothing is stored twice.

Durability: each record is written to the OS (``write`` + ``flush``) before
:meth:`append` returns, so killing the process (SIGKILL) loses nothing appended; the
files are ``fsync``-ed at most every ``fsync_interval`` (1 s), which bounds what a
machine crash can lose. At start (:mod:`.spoolscan`) a torn last record (a crash mid-write)
is cut off; a damaged record is skipped and every intact one after it kept, and exactly what
was lost is logged and counted; a malformed acknowledgement line is ignored; new records go to
a new segment. The spool is bounded: past ``max_bytes`` the oldest segment is dropped, counted
and logged.
Segments of earlier versions (``<seq>.jsonl``, one JSON row per line) are converted at
start by the ``legacy`` function, when one is given.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .spoolscan import scan

log = logging.getLogger("llmtap.spool")
_HEADER = struct.Struct("<II")  # payload length, crc32 of the payload
SUFFIX = ".rec"


@dataclass(slots=True)
class Batch:
    seq: int
    first: int
    rows: list[bytes]
    token: str
    end_offset: int  # byte offset in the segment after the batch's last record
    count: int = -1  # records the batch covers (damaged ones skipped included); -1: len(rows)

    def __post_init__(self) -> None:
        if self.count < 0:
            self.count = len(self.rows)


class _Segment:
    __slots__ = ("ack_fh", "acked", "acked_offset", "bytes", "holes", "offsets", "path", "pending", "records", "seq")

    def __init__(self, path: Path, seq: int) -> None:
        self.path = path
        self.seq = seq
        self.records = 0  # complete records in the file
        self.bytes = 0
        self.acked = 0  # records [0, acked) are in the store
        self.acked_offset = 0  # byte offset of record `acked`
        self.pending: tuple[int, int] | None = None  # (first, count) begun, not acked
        self.offsets: list[int] | None = None  # a recovered segment: each record's offset (read by index)
        self.holes: set[int] = set()  # a recovered segment's damaged records: skipped
        self.ack_fh = open(path.with_suffix(".ack"), "ab")  # noqa: SIM115 - closed in close()

    def close(self) -> None:
        self.ack_fh.close()


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


class Spool:
    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = 1 << 30,
        segment_bytes: int = 8 << 20,
        fsync_interval: float = 1.0,
        on_drop: Callable[[str, int], None] | None = None,
        legacy: Callable[[bytes], bytes] | None = None,
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
        self._active = self._new_segment()  # recovered segments are only read: new records start afresh
        self._fh = open(self._active.path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._convert_legacy(legacy)

    # -- recovery ------------------------------------------------------------------
    def _recover(self) -> None:
        for path in sorted(self.dir.glob("*" + SUFFIX)):
            try:
                seq = int(path.stem)
            except ValueError:
                log.error("spool: %s is not a spool segment; left as it is", path.name)
                continue
            seg = _Segment(path, seq)
            data = path.read_bytes()
            found = scan(data)
            if found.torn and found.end < len(data):  # a torn last record (crash mid-write): cut it off
                with open(path, "r+b") as f:
                    f.truncate(found.end)
            seg.records, seg.bytes = len(found.offsets), found.end
            seg.offsets, seg.holes = found.offsets, found.holes
            self._read_acks(seg)
            if 0 <= found.reliable < seg.acked:  # acks past damaged bytes cannot be matched: send those again
                seg.acked, seg.pending = found.reliable, None
            seg.acked = min(seg.acked, seg.records)
            if seg.pending is not None and (seg.pending[0] != seg.acked or sum(seg.pending) > seg.records):
                seg.pending = None
            if found.lost:
                log.error(
                    "spool: %s is damaged: %d record(s) lost, %d intact kept", path.name, found.lost,
                    seg.records - len(found.holes),
                )  # fmt: skip
                if self._on_drop:
                    self._on_drop("spool_corrupt", found.lost)
            self._segments.append(seg)
        done = [s for s in self._segments if s.acked >= s.records and s.pending is None]
        for seg in done:
            self._delete(seg)
        if self._segments:
            n = sum(s.records - s.acked for s in self._segments)
            if n:
                log.info("spool: %d records from a previous run will be replayed", n)

    def _convert_legacy(self, convert: Callable[[bytes], bytes] | None) -> None:
        """Move the unsent rows of ``.jsonl`` segments (earlier versions) into this spool."""
        for path in sorted(self.dir.glob("*.jsonl")):
            if convert is None:
                log.warning("spool: %s is from an earlier version and is left as it is", path.name)
                continue
            seg = _Segment(path, int(path.stem))
            self._read_acks(seg)
            seg.close()
            lines = path.read_bytes().split(b"\n")[:-1]  # the last piece is '' or a torn line
            # From the first unacknowledged row; a begun batch that reached the store before the
            # crash gets a new token here, so it may be stored twice (once, at the upgrade).
            moved = 0
            for line in lines[seg.acked :]:
                try:
                    self.append(convert(line))
                    moved += 1
                except Exception as e:  # one bad row must not keep the others from the store
                    log.error("spool: a row of %s cannot be converted (%s); dropped", path.name, e)
                    if self._on_drop:
                        self._on_drop("spool_corrupt", 1)
            self.maybe_fsync(force=True)
            for p in (path, path.with_suffix(".ack")):
                p.unlink(missing_ok=True)
            log.info("spool: %d records of %s (an earlier version's spool) will be sent", moved, path.name)

    @staticmethod
    def _read_acks(seg: _Segment) -> None:
        try:
            text = seg.path.with_suffix(".ack").read_bytes().decode("ascii", "replace")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            parts = line.split()
            if len(parts) != 3 or parts[0] not in ("A", "B") or not (parts[1].isdigit() and parts[2].isdigit()):
                if line.strip():
                    log.warning("spool: ignoring a malformed line of %s: %r", seg.path.name, line[:80])
                continue  # a torn or damaged line
            first, count = int(parts[1]), int(parts[2])
            if parts[0] == "B":
                seg.pending = (first, count)
            elif first == seg.acked:
                seg.acked = first + count
                if seg.pending == (first, count):
                    seg.pending = None

    def _new_segment(self) -> _Segment:
        seq = (self._segments[-1].seq + 1) if self._segments else int(time.time() * 1000)
        path = self.dir / f"{seq:015d}{SUFFIX}"
        path.touch()
        seg = _Segment(path, seq)
        self._segments.append(seg)
        return seg

    # -- producer side ---------------------------------------------------------------
    def append(self, record: bytes) -> None:
        """Append one record; durable against SIGKILL on return. Raises OSError (a full disk) with the
        segment as it was: a record is in the spool whole or not at all."""
        data = frame(record)
        with self._lock:
            if self._active.bytes >= self.segment_bytes:
                fresh = self._new_segment()
                self._fh.close()
                self._active = fresh
                self._fh = open(self._active.path, "ab", buffering=0)  # noqa: SIM115
            view = memoryview(data)
            try:
                while view:
                    n = self._fh.write(view)
                    view = view[n or 0 :]
                    if not n:
                        raise OSError("short write to the spool")
            except OSError:
                try:
                    os.ftruncate(self._fh.fileno(), self._active.bytes)  # no torn record left behind
                except OSError:
                    pass
                raise
            self._active.records += 1
            self._active.bytes += len(data)
            self._enforce_bound()

    def _enforce_bound(self) -> None:
        while self.total_bytes() > self.max_bytes and len(self._segments) > 1:
            oldest = self._segments[0]
            lost = oldest.records - oldest.acked
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
                    rows, end, covered = self._read(seg, first, count)
                    return Batch(seg.seq, first, rows, f"{seg.seq}:{first}:{count}", end, covered)
                if seg.acked < seg.records:
                    count = min(max_rows, seg.records - seg.acked)
                    rows, end, covered = self._read(seg, seg.acked, count)
                    seg.ack_fh.write(f"B {seg.acked} {covered}\n".encode())
                    seg.ack_fh.flush()
                    seg.pending = (seg.acked, covered)
                    return Batch(seg.seq, seg.acked, rows, f"{seg.seq}:{seg.acked}:{covered}", end, covered)
                if seg is not self._active and seg.acked >= seg.records:
                    continue
        return None

    def _read(self, seg: _Segment, first: int, count: int) -> tuple[list[bytes], int, int]:
        """Records [first, first + count): (the intact ones, the offset after them, how many were covered)."""
        if seg.offsets is not None:
            return self._read_indexed(seg, first, count)
        if seg is self._active:
            self._fh.flush()
        offset = seg.acked_offset if first == seg.acked else 0
        with open(seg.path, "rb") as f:
            f.seek(offset)
            rows: list[bytes] = []
            pos = offset
            for _ in range(count):
                head = f.read(_HEADER.size)
                if len(head) < _HEADER.size:
                    break
                length, crc = _HEADER.unpack(head)
                payload = f.read(length)
                if len(payload) < length or zlib.crc32(payload) != crc:
                    break  # checked at start; a short read here means the file changed under us
                rows.append(payload)
                pos += _HEADER.size + length
        return rows, pos, len(rows)

    @staticmethod
    def _read_indexed(seg: _Segment, first: int, count: int) -> tuple[list[bytes], int, int]:
        offsets = seg.offsets or []
        last = min(first + count, seg.records)
        rows: list[bytes] = []
        with open(seg.path, "rb") as f:
            for i in range(first, last):
                if i in seg.holes:
                    continue
                f.seek(offsets[i])
                head = f.read(_HEADER.size)
                length, crc = _HEADER.unpack(head)
                payload = f.read(length)
                if len(payload) == length and zlib.crc32(payload) == crc:
                    rows.append(payload)
        end = offsets[last] if last < len(offsets) else seg.bytes
        return rows, end, max(last - first, 0)

    def ack(self, batch: Batch) -> None:
        with self._lock:
            seg = next((s for s in self._segments if s.seq == batch.seq), None)
            if seg is None:
                return  # dropped by the size bound meanwhile
            seg.ack_fh.write(f"A {batch.first} {batch.count}\n".encode())
            seg.ack_fh.flush()
            seg.acked = batch.first + batch.count
            seg.acked_offset = batch.end_offset
            seg.pending = None
            if seg is not self._active and seg.acked >= seg.records:
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
            return sum(s.records - s.acked for s in self._segments)

    def mark(self) -> tuple[int, int]:
        """The current end of the spool: (active segment, records in it)."""
        with self._lock:
            return self._active.seq, self._active.records

    def sent_through(self, mark: tuple[int, int]) -> bool:
        """Whether every record appended before ``mark`` was taken was acknowledged (or dropped)."""
        seq, records = mark
        with self._lock:
            for s in self._segments:
                if s.seq < seq and s.acked < s.records:
                    return False
                if s.seq == seq and s.acked < records:
                    return False
        return True

    def total_bytes(self) -> int:
        return sum(s.bytes for s in self._segments)

    def close(self) -> None:
        self.maybe_fsync(force=True)
        with self._lock:
            self._fh.close()
            for seg in list(self._segments):
                seg.close()
            # A fully acked active segment is not needed across restarts.
            if self._active.acked >= self._active.records and self._active.pending is None:
                for p in (self._active.path, self._active.path.with_suffix(".ack")):
                    try:
                        p.unlink()
                    except FileNotFoundError:
                        pass


def json_line_converter(encode: Callable[[dict[str, object]], bytes]) -> Callable[[bytes], bytes]:
    """For ``legacy``: an earlier version's JSON row → this version's record."""

    def convert(line: bytes) -> bytes:
        row = json.loads(line)
        if not isinstance(row, dict):
            raise ValueError("not a JSON object")
        return encode(row)

    return convert
