"""The durable spool and the store writer: batching, retries, replay, corruption, bounds, quarantine."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from llmtap.store.spool import Spool, frame, json_line_converter
from llmtap.store.spoolscan import scan
from llmtap.store.writer import StoreWriter


class FlakyBackend:
    def __init__(self, fail: int = 2) -> None:
        self.rows: list[bytes] = []
        self.tokens: list[str] = []
        self.fail = fail

    def insert_rows(self, rows: list[bytes], token: str) -> None:
        if self.fail:
            self.fail -= 1
            raise ConnectionError("store away")
        if token not in self.tokens:  # what the store's deduplication does
            self.rows += rows
            self.tokens.append(token)

    def query(self, sql: str, fmt: str = "JSONEachRow") -> bytes:
        return b""

    def close(self) -> None:
        pass


def test_writer_batches_and_retries_without_losing_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda s: None)
    fb = FlakyBackend()
    w = StoreWriter(fb, Spool(tmp_path / "spool"), batch_size=10, linger=0.01, encode=lambda r: json.dumps(r).encode())
    for i in range(25):
        w.submit({"i": i})
    assert w.flush(10.0)
    w.close()
    assert [json.loads(r)["i"] for r in fb.rows] == list(range(25))
    assert not list((tmp_path / "spool").glob("*.rec"))  # everything acknowledged: nothing kept


def test_spool_replays_a_begun_batch_with_the_same_token(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    for i in range(5):
        sp.append(b'{"i":%d}' % i)
    b1 = sp.next_batch(3)
    assert b1 is not None and len(b1.rows) == 3
    sp.ack(b1)
    b2 = sp.next_batch(3)  # begun, then the process dies before the ack
    assert b2 is not None and b2.rows == [b'{"i":3}', b'{"i":4}']
    del sp  # no close(): a crash
    sp2 = Spool(tmp_path)
    again = sp2.next_batch(100)
    assert again is not None and (again.rows, again.token) == (b2.rows, b2.token)
    sp2.ack(again)
    assert sp2.next_batch(100) is None and sp2.unsent() == 0


def test_spool_survives_a_torn_record(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    sp.append(b"one")
    sp.append(b"two\nwith a newline and \x00 bytes")
    seg = next(tmp_path.glob("*.rec"))
    with open(seg, "ab") as f:
        f.write(frame(b"three")[:-2])  # half a record: the writer was killed mid-write
    sp2 = Spool(tmp_path)
    b = sp2.next_batch(10)
    assert b is not None and b.rows == [b"one", b"two\nwith a newline and \x00 bytes"]
    sp2.append(b"four")  # appends continue after the cut
    sp2.ack(b)
    b2 = sp2.next_batch(10)
    assert b2 is not None and b2.rows == [b"four"]


def test_spool_skips_a_damaged_record_keeps_the_rest_and_counts_it(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    for r in (b"alpha", b"bravo", b"charlie"):
        sp.append(r)
    sp.close()
    seg = next(tmp_path.glob("*.rec"))
    data = bytearray(seg.read_bytes())
    data[len(frame(b"alpha")) + 9] ^= 0xFF  # flip a byte inside the second record's payload
    seg.write_bytes(bytes(data))
    dropped: list[tuple[str, int]] = []
    sp2 = Spool(tmp_path, on_drop=lambda r, n: dropped.append((r, n)))
    b = sp2.next_batch(10)
    assert b is not None and b.rows == [b"alpha", b"charlie"]
    assert dropped == [("spool_corrupt", 1)]


def test_spool_converts_an_earlier_versions_jsonl_segment(tmp_path: Path) -> None:
    rows = [{"i": i} for i in range(5)]
    (tmp_path / "000000000000001.jsonl").write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows) + b'{"i":')
    (tmp_path / "000000000000001.ack").write_bytes(b"B 0 2\nA 0 2\n")  # two rows were in the store already
    sp = Spool(tmp_path, legacy=json_line_converter(lambda r: b"row %d" % int(str(r["i"]))))
    b = sp.next_batch(10)
    assert b is not None and b.rows == [b"row 2", b"row 3", b"row 4"]
    assert not list(tmp_path.glob("*.jsonl")) and not (tmp_path / "000000000000001.ack").exists()


def test_spool_is_bounded_and_counts_what_it_drops(tmp_path: Path) -> None:
    dropped: list[tuple[str, int]] = []
    sp = Spool(tmp_path, max_bytes=4000, segment_bytes=1000, on_drop=lambda r, n: dropped.append((r, n)))
    for i in range(200):
        sp.append(b'{"i":%d,"pad":"%s"}' % (i, b"x" * 12))
    assert sp.total_bytes() <= 4000 + 1000
    assert dropped and all(r == "spool_full" for r, _ in dropped)
    assert sum(n for _, n in dropped) + sp.unsent() == 200
    first = sp.next_batch(1)
    assert first is not None and json.loads(first.rows[0])["i"] > 0  # the oldest went first


def test_writer_lingers_for_larger_inserts_and_flush_sends_at_once(tmp_path: Path) -> None:
    fb = FlakyBackend(fail=0)
    inserts: list[int] = []
    plain_insert = fb.insert_rows

    def counting(rows: list[bytes], token: str) -> None:
        inserts.append(len(rows))
        plain_insert(rows, token)

    fb.insert_rows = counting  # type: ignore[method-assign]
    w = StoreWriter(fb, Spool(tmp_path / "spool"), batch_size=5, linger=60.0, encode=lambda r: json.dumps(r).encode())
    try:
        for i in range(12):
            w.submit({"i": i})
        deadline = time.monotonic() + 10
        while len(fb.rows) < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        assert inserts == [5, 5]  # full batches go at once; the last two wait for more rows
        assert w.queued() == 2
        assert w.flush(10.0)  # ... unless someone needs them now
        assert inserts == [5, 5, 2] and [json.loads(r)["i"] for r in fb.rows] == list(range(12))
    finally:
        w.close()


class PickyBackend(FlakyBackend):
    """Rejects any batch holding a row that does not parse, as ClickHouse does (the whole insert fails)."""

    def __init__(self, outage_after: int = -1) -> None:
        super().__init__(fail=0)
        self.attempts = 0
        self.outage_after = outage_after  # the store goes away once, after this many attempts

    def insert_rows(self, rows: list[bytes], token: str) -> None:
        self.attempts += 1
        if self.attempts == self.outage_after:
            raise ConnectionError("store away")
        if any(not r.startswith(b"{") for r in rows):
            raise RuntimeError(
                "Code: 27. DB::Exception: Cannot parse input: expected '{' (CANNOT_PARSE_INPUT_ASSERTION_FAILED)"
            )
        super().insert_rows(rows, token)


@pytest.mark.parametrize("outage_after", [-1, 3, 9, 12])
def test_writer_quarantines_rows_the_store_rejects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outage_after: int
) -> None:
    """A rejected row neither blocks the spool forever nor takes its batch down: the others are stored once
    (also when the store goes away mid-split), the rejected one is kept in quarantine and counted."""
    monkeypatch.setattr(time, "sleep", lambda s: None)
    pb = PickyBackend(outage_after)
    dropped: list[tuple[str, int]] = []
    rows = [json.dumps({"i": i}).encode() for i in range(40)]
    rows[13] = rows[31] = b"garbage"
    w = StoreWriter(
        pb,
        Spool(tmp_path / "spool"),
        batch_size=40,
        linger=0.01,
        encode=lambda r: r["raw"],
        quarantine_dir=tmp_path / "quarantine",
        on_drop=lambda reason, n: dropped.append((reason, n)),
    )
    for r in rows:
        w.submit({"raw": r})
    assert w.flush(10.0)
    w.close()
    assert sorted(json.loads(r)["i"] for r in pb.rows) == [i for i in range(40) if i not in (13, 31)]
    assert (w.written, w.quarantined) == (38, 2)
    assert dropped == [("store_rejected", 1), ("store_rejected", 1)]
    kept = sorted((tmp_path / "quarantine").glob("*.rec"))
    assert len(kept) == 2 and all(scan(p.read_bytes()).offsets == [0] for p in kept)
    assert {p.read_bytes()[8:] for p in kept} == {b"garbage"}
    assert not list((tmp_path / "spool").glob("*.rec"))


def _segment_with(tmp_path: Path, n: int, acked: int) -> tuple[Path, list[bytes]]:
    rows = [b"row-%03d-" % i + b"x" * 40 for i in range(n)]
    sp = Spool(tmp_path)
    for r in rows:
        sp.append(r)
    b = sp.next_batch(acked)
    assert b is not None
    sp.ack(b)
    sp.maybe_fsync(force=True)
    seg = next(tmp_path.glob("*.rec"))
    sp._fh.close()  # as a crash leaves it: no close() bookkeeping
    for s in sp._segments:
        s.close()
    return seg, rows


def _drain(sp: Spool) -> list[bytes]:
    out: list[bytes] = []
    while (b := sp.next_batch(7)) is not None and (b.rows or b.count):
        out += b.rows
        sp.ack(b)
    return out


def test_a_damaged_record_loses_exactly_that_record_and_new_records_are_all_kept(tmp_path: Path) -> None:
    """Finding 14: after the documented corruption handling, 40 of 60 new records were lost silently and the
    counter said 1 for 31 lost records."""
    seg, rows = _segment_with(tmp_path, 31, 10)
    data = bytearray(seg.read_bytes())
    rec = len(frame(rows[0]))
    data[15 * rec + 8 + 5] ^= 0xFF  # record 15's payload
    seg.write_bytes(bytes(data))
    dropped: list[tuple[str, int]] = []
    sp = Spool(tmp_path, on_drop=lambda r, n: dropped.append((r, n)))
    new = [b"new-%03d" % i for i in range(60)]
    for r in new:
        sp.append(r)
    assert _drain(sp) == [*rows[10:15], *rows[16:], *new]
    assert dropped == [("spool_corrupt", 1)]
    sp.close()


def test_a_damaged_header_resynchronizes_and_loses_nothing_intact(tmp_path: Path) -> None:
    seg, rows = _segment_with(tmp_path, 20, 5)
    data = bytearray(seg.read_bytes())
    rec = len(frame(rows[0]))
    data[8 * rec : 8 * rec + 4] = b"\xff\xff\xff\x7f"  # record 8's length: nonsense
    seg.write_bytes(bytes(data))
    dropped: list[tuple[str, int]] = []
    sp = Spool(tmp_path, on_drop=lambda r, n: dropped.append((r, n)))
    assert _drain(sp) == [*rows[5:8], *rows[9:]]
    assert dropped == [("spool_corrupt", 1)]


@pytest.mark.parametrize("bad", [b"A x y\n", b"B 1 2 3\n", b"\xff\xfe garbage\n", b"A 0\n", b"Z 0 1\n"])
def test_one_bad_ack_line_does_not_stop_the_start(tmp_path: Path, bad: bytes) -> None:
    """Finding 14: one bad .ack line stopped the sidecar from starting."""
    seg, rows = _segment_with(tmp_path, 12, 4)
    ack = seg.with_suffix(".ack")
    ack.write_bytes(bad + ack.read_bytes() + bad)
    sp = Spool(tmp_path)
    assert _drain(sp) == rows[4:]
