"""`llmtap demo`: the viewer fills within a minute, the live traffic keeps the history's pace, the env line it
prints points a client at its sidecar, and the command it prints at the end shows the regression it planted."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import LLMTAP, free_port, stop

from llmtap.testing.synthetic import daily_weight

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]
SYNTHETIC_KEYS = "('a1b2c3d4e5f60718', '9f8e7d6c5b4a3921')"  # the seeded history's api_key_id values
DURATION = 120
# The viewer fills within a minute on an idle two-core machine (README); seeding is CPU work, so a busy machine (the
# parallel suite, a CPU load beside it) takes longer: the test allows three minutes and says how long it took.
FILL_S = 180


def token(data: Path) -> str:
    return (data / "admin-token").read_text().strip()  # what the demo's link carries


def post(admin: int, path: str, body: dict[str, object], tok: str) -> tuple[int, object]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=20)
    try:
        conn.request(
            "POST", path, json.dumps(body), {"Content-Type": "application/json", "Authorization": f"Bearer {tok}"}
        )
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def sql(admin: int, query: str, tok: str) -> list[list[object]]:
    status, frame = post(admin, "/api/sql", {"query": query, "format": "JSONCompact"}, tok)
    assert status == 200, frame
    return list(frame["data"])  # type: ignore[index]


def test_demo(tmp_path: Path) -> None:
    listen, admin = free_port(), free_port()
    data = tmp_path / "demo"
    t0 = time.monotonic()
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY") and not k.startswith("LLMTAP_")}
    proc = subprocess.Popen(
        [*LLMTAP, "demo", "--data-dir", str(data), "--listen", f"127.0.0.1:{listen}", "--admin",
         f"127.0.0.1:{admin}", "--duration", str(DURATION)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )  # fmt: skip
    lines: list[str] = []
    flowing: list[float] = []  # when the demo said its live traffic started

    def read() -> None:
        for line in iter(proc.stdout.readline, ""):  # type: ignore[union-attr]
            if "live traffic is flowing" in line:
                flowing.append(time.time())
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        filled = False
        while time.monotonic() - t0 < FILL_S and not filled:
            time.sleep(1)
            try:
                status, board = post(admin, "/api/panel", {"uid": "llmtap-overview", "panel": 5}, token(data))
            except (OSError, ValueError):  # not up yet (no token file, no answer)
                continue
            filled = status == 200 and isinstance(board, dict) and len(board["rows"]) > 10
        assert filled, f"the viewer was not filled after {time.monotonic() - t0:.0f}s: {lines}"
        for uid, n in (("llmtap-overview", 9), ("llmtap-errors", 8), ("llmtap-cost", 11)):
            for pid in range(1, n + 1):
                status, frame = post(admin, "/api/panel", {"uid": uid, "panel": pid}, token(data))
                assert status == 200 and isinstance(frame, dict) and frame["rows"], (uid, pid, frame)
        # the env line the demo prints points a client at this sidecar, with its CA
        env_line = next(line for line in lines if "env --data-dir" in line)
        eval_cmd = env_line.split("point your own code at it: ", 1)[1].strip()
        sid = "demo-env-check"
        client = (
            "import openai; openai.OpenAI(api_key='sk-x', max_retries=0).embeddings.create("
            f"model='text-embedding-3-small', input='x', extra_headers={{'x-llmtap-session': '{sid}'}})"
        )
        r = subprocess.run(["sh", "-c", f'{eval_cmd} && exec {shlex.quote(sys.executable)} -c "{client}"'],
                           capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
        assert r.returncode == 0, r.stderr
        # the row lands after the writer's linger (≤ 1 s), later on a busy machine: wait for it, then exactly one
        deadline = time.monotonic() + 15
        while (n := sql(admin, f"SELECT count() FROM llm_calls WHERE session_id = '{sid}'", token(data))) == [[0]]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.25)
        assert n == [[1]]
        code = proc.wait(DURATION + 60)
    finally:
        code = stop(proc, timeout=30)
    stopped_at = time.time()
    out = "".join(lines)
    assert code == 0, out
    assert "live traffic is flowing" in out
    # the command printed at the end, run as printed, shows the planted regression
    m = re.search(r"`([^`]*check-cost[^`]*)` shows the planted regression \((\w+):", out)
    assert m, out
    r = subprocess.run(shlex.split(m.group(1)), capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 1, (r.stdout, r.stderr)
    regressed = [line.split()[0] for line in r.stdout.splitlines() if line.endswith("REGRESSION")]
    assert regressed == [m.group(2)], r.stdout
    # the live rate is the seeded history's rate at this time of day, and the live traffic keeps it
    q = (
        f"SELECT countIf(api_key_id IN {SYNTHETIC_KEYS} AND timestamp < now() - INTERVAL 2 HOUR), "
        # the live calls: LLM calls without the history's keys, not the env line's
        f"countIf(api_key_id NOT IN {SYNTHETIC_KEYS} AND api != '' AND session_id != '{sid}') FROM llm_calls"
    )
    r = subprocess.run([*LLMTAP, "sql", q, "--data-dir", str(data), "--format", "JSONCompactEachRow"],
                       capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    history, live = json.loads(r.stdout)
    history_rate = history / (8 * 86400 - 7200) * daily_weight(flowing[0])
    m = re.search(r"([\d.]+) calls/min: the seeded history's rate", out)
    assert m, out
    rate = float(m.group(1)) / 60
    assert 0.75 < rate / history_rate < 1.33, (rate, history_rate)  # on main: ~400x the history
    expected = rate * (stopped_at - flowing[0])
    assert expected / 4 <= live <= expected * 4 + 3, (live, expected)
