"""Storage faults on a running sidecar (issue #19, findings 13 and 14): a real full disk (a small tmpfs), and a
damaged spool record and acknowledgement line across a restart."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ClickHouseHTTP, Mock, Sidecar, free_port, openai_client, start_sidecar, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def health(sc: Sidecar) -> dict[str, object]:
    _, body = sc.admin_request("GET", "/healthz")
    return dict(json.loads(body))


def calls(sc: Sidecar, n: int, feature: str) -> None:
    client = openai_client(sc)
    for _ in range(n):
        client.embeddings.create(model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-feature": feature})


def stored(sc: Sidecar, feature: str) -> int:
    return int(sc.sql(f"SELECT count() AS n FROM llm_calls WHERE feature = '{feature}'")[0]["n"])


def wait_for(pred: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real filesystem that fills up: a 160 MiB tmpfs (needs root, as CI and this machine are)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * (1 << 20))
            f.flush()
    return filler


def test_disk_full_then_space_back_stores_new_calls_and_health_is_honest(mock: Mock, small_disk: Path) -> None:
    """Finding 13: after a full disk, 0 of 100 new calls reached the store while /healthz said store_ok: true."""
    sc = start_sidecar(small_disk / "data", mock)
    try:
        calls(sc, 5, "before")
        assert wait_for(lambda: stored(sc, "before") == 5, 15)
        assert health(sc)["store_ok"] is True
        filler = fill(small_disk)
        calls(sc, 30, "during")  # traffic itself is unaffected
        assert wait_for(lambda: health(sc)["store_ok"] is False, 15), health(sc)
        time.sleep(2)
        assert health(sc)["store_ok"] is False  # and it stays honest while the disk is full
        filler.unlink()
        calls(sc, 100, "after")
        assert wait_for(lambda: stored(sc, "after") == 100, 60), stored(sc, "after")
        assert wait_for(lambda: stored(sc, "during") == 30, 30)  # held in memory, nothing lost
        assert wait_for(lambda: health(sc)["store_ok"] is True, 30), health(sc)
        _, metrics = sc.admin_request("GET", "/metrics")
        assert b"llmtap_store_errors_total" in metrics
        assert b'llmtap_records_dropped_total{reason="disk_full"}' not in metrics
    finally:
        stop(sc.proc)


def test_a_damaged_spool_record_and_ack_line_lose_only_that_record(mock: Mock, tmp_path: Path) -> None:
    """Finding 14: one bad .ack line stopped the start; after a damaged record, 40 of 60 new records were lost
    silently and the counter said 1 for 31 lost records."""
    port = free_port()
    ch = ClickHouseHTTP(tmp_path / "ch", port)  # the store, away during the first run: records stay in the spool
    data = tmp_path / "data"
    sc = start_sidecar(data, mock, "--store", ch.url)
    try:
        calls(sc, 31, "spooled")
        assert wait_for(lambda: health(sc)["store_queue"] == 31, 15)
    finally:
        stop(sc.proc)
    seg = sorted((data / "spool").glob("*.rec"))[-1]
    raw = bytearray(seg.read_bytes())
    assert len(raw) > 1000
    raw[len(raw) // 2] ^= 0xFF  # a bit flip inside one record's payload
    seg.write_bytes(bytes(raw))
    ack = seg.with_suffix(".ack")
    ack.write_bytes(ack.read_bytes() + b"A garbage\n\xff\xfe\n")
    ch.start()
    try:
        sc = start_sidecar(data, mock, "--store", ch.url)
        try:
            calls(sc, 60, "fresh")
            client = ch.client()

            def count(feature: str) -> int:
                return int(client.command(f"SELECT count() FROM llmtap.llm_calls WHERE feature = '{feature}'"))

            assert wait_for(lambda: count("fresh") == 60, 60), count("fresh")
            assert wait_for(lambda: count("spooled") == 30, 30), count("spooled")
            time.sleep(1)
            assert count("spooled") == 30  # exactly the damaged one is missing
            _, metrics = sc.admin_request("GET", "/metrics")
            assert b'llmtap_records_dropped_total{reason="spool_corrupt"} 1.0' in metrics
        finally:
            stop(sc.proc)
    finally:
        ch.stop()
