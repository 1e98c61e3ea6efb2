"""Reads never fail under writes (issue 28): several readers run hundreds of reads — ``/api/sql``, the explain
analyses, viewer panels — against a real ``llmtap run`` on a seeded embedded store while calls stream through it
and other clients abandon their reads half-way (each abandoned read is cancelled in the engine, the way a browser
leaving a page cancels its panels), and every read a reader waited for answers 200 with well-formed rows.
"""

from __future__ import annotations

import concurrent.futures
import json
import random
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import LLMTAP, Mock, Sidecar, openai_client, start_sidecar, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

DURATION_S = 25.0
READERS = 4


@pytest.fixture(scope="module")
def sc(mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    data = tmp_path_factory.mktemp("rw") / "data"
    r = subprocess.run([*LLMTAP, "seed", "--data-dir", str(data), "--calls", "800", "--days", "8", "--scenario",
                        "explain"], capture_output=True, text=True, timeout=180)  # fmt: skip
    assert r.returncode == 0, r.stderr
    s = start_sidecar(data, mock, "--workers", "1")
    yield s
    stop(s.proc)


def post(sc: Sidecar, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {sc.token}"}
    return sc.admin_request("POST", path, json.dumps(body).encode(), headers)


def abandon(sc: Sidecar, path: str, body: dict[str, Any]) -> None:
    """Send a read and go away before its answer: the sidecar cancels it."""
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{sc.admin}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {sc.token}\r\nContent-Length: {len(data)}\r\n\r\n").encode()  # fmt: skip
    with socket.create_connection(("127.0.0.1", sc.admin), timeout=10) as s:
        s.sendall(head + data)
        time.sleep(random.uniform(0.0, 0.3))


TOP_MODELS = "SELECT request_model AS model, count() AS n FROM llm_calls GROUP BY model ORDER BY n DESC"
ONE_FEATURE = "SELECT count() AS n, sum(cost_usd) AS usd FROM llm_calls WHERE feature = {f:String}"


def json_rows(body: bytes) -> bool:
    return all(isinstance(json.loads(x), dict) for x in body.splitlines() if x.strip())


def json_object(body: bytes) -> bool:
    return isinstance(json.loads(body), dict)


def reads() -> list[tuple[str, str, dict[str, Any], Callable[[bytes], bool]]]:
    """(name, path, body, well-formed?) of each kind of read, as often as a viewer asks for it."""
    now = int(time.time())
    window = {"window": "24h", "baseline": "7d", "end": now}
    sql = ("sql", "/api/sql", {"query": TOP_MODELS, "format": "JSONEachRow"}, json_rows)
    params = ("sql-params", "/api/sql", {"query": ONE_FEATURE, "params": {"f": "summarize"}}, json_rows)
    overview = ("panel-overview", "/api/panel", {"uid": "llmtap-overview", "panel": 1}, json_object)
    explorer = ("panel-calls", "/api/panel", {"uid": "llmtap-calls", "panel": 1}, json_object)
    cost = ("explain-cost", "/api/explain-cost", {**window, "by": ["model", "feature"]}, json_object)
    latency = ("explain-latency", "/api/explain-latency", window, json_object)
    return [sql, sql, sql, params, params, overview, overview, explorer, explorer, cost, latency]


def test_hundreds_of_reads_under_writes_and_cancels_never_fail(sc: Sidecar) -> None:
    kinds = reads()
    stop_at = time.monotonic() + DURATION_S
    failures: list[str] = []
    done: dict[str, int] = {k[0]: 0 for k in kinds}
    lock = threading.Lock()
    calls = 0
    took: dict[str, list[float]] = {}

    def writer() -> None:
        nonlocal calls
        c = openai_client(sc, "sk-rw")
        while time.monotonic() < stop_at:
            stream = calls % 2 == 0
            msgs: Any = [{"role": "user", "content": f"{calls}"}]
            out = c.chat.completions.create(
                model="gpt-4o-mini", messages=msgs, stream=stream, extra_headers={"x-llmtap-feature": "rw"}
            )
            if stream:
                list(out)
            calls += 1

    def reader(i: int) -> None:
        rnd = random.Random(i)
        while time.monotonic() < stop_at:
            name, path, body, ok = kinds[rnd.randrange(len(kinds))]
            if rnd.random() < 0.25:
                abandon(sc, path, body)
                continue
            t0 = time.monotonic()
            status, answer = post(sc, path, body)
            took.setdefault(name, []).append(round(time.monotonic() - t0, 2))
            try:
                good = status == 200 and ok(answer)
            except ValueError:
                good = False
            with lock:
                done[name] += 1
                if not good:
                    failures.append(f"{name}: {status} {answer[:300]!r}")

    with concurrent.futures.ThreadPoolExecutor(READERS + 1) as pool:
        futures = [pool.submit(writer), *(pool.submit(reader, i) for i in range(READERS))]
        for f in futures:
            f.result()
    print({k: (len(v), max(v)) for k, v in took.items()})
    assert failures == [], (len(failures), failures[:5])
    assert sum(done.values()) >= 20 and all(done.values()), done  # each kind, at a rate the machine allows
    assert calls >= 20
    rows = sc.rows("feature = 'rw'", calls, timeout=60)
    assert len(rows) == calls  # and the calls were all recorded meanwhile
