"""A store that is away says so, and the gauges tell the truth (issue 28).

A ClickHouse server store that does not answer at start: one line in the log at start naming the store (its URL
without the password), ``/healthz`` ``store_error`` from the start, one ``llmtap sql: …`` line from a read command,
and the calls keep flowing. ``/metrics`` gauges are read when scraped: during the outage the queue and the spool
grow, and once the store is back they fall to 0, with nothing polling ``/healthz``.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from helpers import LLMTAP, ClickHouseHTTP, Mock, Sidecar, free_port, openai_client, start_sidecar, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def gauges(sc: Sidecar) -> dict[str, float]:
    """Every unlabelled gauge sample of ``/metrics`` (the scrape only: never ``/healthz``)."""
    status, body = sc.admin_request("GET", "/metrics")
    assert status == 200
    out: dict[str, float] = {}
    for line in body.decode().splitlines():
        m = re.fullmatch(r"(llmtap_[a-z_]+) ([0-9.e+-]+)", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def wait_gauge(sc: Sidecar, name: str, ok: object, timeout: float = 60.0) -> float:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = gauges(sc).get(name)
        if value is not None and ok(value):  # type: ignore[operator]
            return value
        time.sleep(0.2)
    raise AssertionError(f"{name} stayed {value}")


def call(sc: Sidecar, i: int) -> None:
    c = openai_client(sc, "sk-health")
    r = c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": f"n{i}"}])
    assert r.choices[0].message.content


def test_a_store_away_at_start_says_so_and_the_gauges_move_without_healthz(mock: Mock, tmp_path: Path) -> None:
    port = free_port()  # nothing listens there yet
    store = f"clickhouse://llmtap:s3cret@127.0.0.1:{port}/llmtap"
    shown = f"clickhouse://llmtap@127.0.0.1:{port}/llmtap"
    ch = ClickHouseHTTP(tmp_path / "ch", port)
    sc = start_sidecar(tmp_path / "data", mock, "--store", store, "--workers", "1")
    try:
        # At start: one line naming the store, and store_error before any call.
        deadline = time.monotonic() + 30
        while "unavailable at start" not in sc.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        log = sc.log.read_text()
        (line,) = [x for x in log.splitlines() if "unavailable" in x]
        assert f"store {shown} unavailable at start (cannot connect: Connection refused)" in line
        _, body = sc.admin_request("GET", "/healthz")
        health = json.loads(body)
        assert health["store_ok"] is False and shown in health["store_error"], health
        assert "Connection refused" in health["store_error"]

        # A read command: one line of llmtap's, exit 2.
        r = subprocess.run([*LLMTAP, "sql", "SELECT 1", "--store", store], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r
        want = f"llmtap sql: {shown}: query failed: cannot connect: Connection refused"
        assert r.stderr.strip().splitlines() == [want]
        # ... and through the sidecar: the store is away (503), not the query wrong (400) or refused (403)
        status, body = sc.admin_request(
            "POST",
            "/api/sql",
            json.dumps({"query": "SELECT 1"}).encode(),
            {"Authorization": f"Bearer {sc.token}", "Content-Type": "application/json"},
        )
        assert status == 503 and body.startswith(b"store unreachable: "), (status, body)

        # Calls flow; the scrape alone shows them queue up.
        before = gauges(sc)
        assert before["llmtap_store_queue_records"] == 0
        for i in range(5):
            call(sc, i)
        assert wait_gauge(sc, "llmtap_store_queue_records", lambda v: v >= 5) == 5
        assert wait_gauge(sc, "llmtap_spool_bytes", lambda v: v > before["llmtap_spool_bytes"]) > 0

        # The store comes back: the writer delivers, and the scrape sees the queue empty.
        ch.start()
        assert wait_gauge(sc, "llmtap_store_queue_records", lambda v: v == 0, timeout=90) == 0
        assert int(ch.client().command("SELECT count() FROM llmtap.llm_calls")) == 5
        log = sc.log.read_text()
        assert "store back after" in log
        for noise in ("urllib3", "Retrying", "Traceback", "s3cret", "Unexpected Http Driver Exception"):
            assert noise not in log, noise
    finally:
        stop(sc.proc)
        ch.stop()
