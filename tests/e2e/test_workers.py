"""``llmtap run --workers N``: several proxy processes on one port, one recorder, one store.

Calls spread over the workers and each is recorded once; a worker that dies is replaced, its calls in
flight recorded as cut by the sidecar; a SIGKILLed supervisor takes its workers with it. (Drain on
SIGTERM, SIGKILL durability and the store outage with several workers: test_shutdown.py and
test_storage.py run with ``--workers 3``.)
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from helpers import Mock, Sidecar, openai_client, session_id, start_sidecar, stop

from llmtap.testing.harness import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
URL = "https://api.openai.com/v1/chat/completions"


def workers_of(sc: Sidecar) -> list[int]:
    kids = Path(f"/proc/{sc.proc.pid}/task/{sc.proc.pid}/children").read_text().split()
    return [int(k) for k in kids if b"llmtap.intercept.worker" in Path(f"/proc/{k}/cmdline").read_bytes()]


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def health(sc: Sidecar) -> dict[str, Any]:
    return json.loads(sc.admin_request("GET", "/healthz")[1])


def call(sc: Sidecar, feature: str) -> None:
    client = openai_client(sc)  # a new client: a new connection (CONNECT), which any worker may accept
    list(
        client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"x-llmtap-feature": feature, "x-mock-events": "20"},
        )
    )
    client.close()


@pytest.fixture
def three(mock: Mock, tmp_path: Path) -> Any:
    sc = start_sidecar(tmp_path / "data", mock, "--workers", "3")
    yield sc
    stop(sc.proc)


def test_calls_spread_over_the_workers_and_each_is_recorded_once(three: Sidecar) -> None:
    pids = workers_of(three)
    assert len(pids) == 3 and health(three)["workers"] == 3
    before = {p: cpu_ticks(p) for p in pids}
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda _: call(three, "spread"), range(60)))
    busy = [p for p in pids if cpu_ticks(p) > before[p]]
    assert len(busy) >= 2, "the kernel handed every connection to one worker"
    rows = three.rows("feature = 'spread'", 60, timeout=20)
    assert len(rows) == 60 and len({r["span_id"] for r in rows}) == 60
    assert {(r["outcome"], r["content_events"], r["usage_source"]) for r in rows} == {("ok", 20, "provider")}


def _slow_stream(sc: Sidecar, sid: str, out: dict[str, Any]) -> None:
    try:
        with (
            httpx2.Client(proxy=sc.proxy_url, verify=ssl.create_default_context(cafile=sc.bundle), timeout=60) as c,
            c.stream(
                "POST",
                URL,
                json={"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
                headers={"x-llmtap-session": sid, "x-mock-events": "400", "x-mock-delay-ms": "100"},
            ) as r,
        ):
            out["body"] = b"".join(r.iter_bytes())
    except Exception as e:
        out["error"] = e


def test_a_killed_worker_is_replaced_and_its_calls_in_flight_are_recorded(three: Sidecar) -> None:
    sids = [session_id() for _ in range(3)]
    results: list[dict[str, Any]] = [{} for _ in sids]
    threads = [threading.Thread(target=_slow_stream, args=(three, s, r)) for s, r in zip(sids, results, strict=True)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while health(three)["inflight_calls"] < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    old = workers_of(three)
    for pid in old:  # every worker: wherever the three streams are, they are cut
        os.kill(pid, signal.SIGKILL)
    for t in threads:
        t.join(30)
    assert all("error" in r for r in results)  # the clients saw their connections drop
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        h, now = health(three), workers_of(three)
        if h["status"] == "ok" and h["workers"] == 3 and len(now) == 3 and not set(now) & set(old):
            break
        time.sleep(0.1)
    assert h["status"] == "ok" and len(now) == 3 and not set(now) & set(old), (h, now, old)
    for sid in sids:
        row = three.row(sid, timeout=10)
        cut = (row["outcome"], row["error_code"], row["finish_reason"])
        assert cut == ("cancelled", "sidecar_shutdown", "cancelled")
        assert "proxy worker stopped" in row["error_message"]
        assert row["input_tokens"] > 0 and row["usage_source"] == "estimated"  # it may have been billed
    call(three, "after")  # the new workers carry traffic
    assert len(three.rows("feature = 'after'", 1, timeout=10)) == 1


def test_a_killed_supervisor_takes_its_workers_with_it(mock: Mock, tmp_path: Path) -> None:
    port = free_port()
    sc = start_sidecar(tmp_path / "data", mock, "--workers", "3", listen_port=port)
    pids = workers_of(sc)
    sc.proc.send_signal(signal.SIGKILL)
    sc.proc.wait(10)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if Path(f"/proc/{p}").exists()], "orphaned workers kept running"
    again = start_sidecar(tmp_path / "data", mock, listen_port=port)  # the port and the data dir are free again
    try:
        call(again, "again")
        assert len(again.rows("feature = 'again'", 1, timeout=10)) == 1
    finally:
        stop(again.proc)
