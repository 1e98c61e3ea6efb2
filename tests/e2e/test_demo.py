"""`llmtap demo` fills the viewer in under a minute from nothing, and stops cleanly."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from helpers import LLMTAP, free_port, stop

pytestmark = pytest.mark.timeout(240)


def test_demo_fills_the_viewer_within_a_minute(tmp_path: Path) -> None:
    import http.client

    listen, admin = free_port(), free_port()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [
            *LLMTAP,
            "demo",
            "--data-dir",
            str(tmp_path / "demo"),
            "--listen",
            f"127.0.0.1:{listen}",
            "--admin",
            f"127.0.0.1:{admin}",
            "--duration",
            "120",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def post(path: str, body: dict[str, object]) -> tuple[int, object]:
        conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=10)
        try:
            token = (tmp_path / "demo" / "admin-token").read_text().strip()  # what the demo's link carries
            conn.request(
                "POST", path, json.dumps(body), {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
            )
            r = conn.getresponse()
            return r.status, json.loads(r.read())
        finally:
            conn.close()

    try:
        filled = False
        while time.monotonic() - t0 < 60 and not filled:
            time.sleep(1)
            try:
                _, live = post("/api/panel", {"uid": "llmtap-overview", "panel": 1, "from": time.time() - 120})
                status, board = post("/api/panel", {"uid": "llmtap-overview", "panel": 5})
            except (OSError, ValueError):  # not up yet (no token file, no answer)
                continue
            assert isinstance(live, dict) and isinstance(board, dict)
            filled = status == 200 and live["rows"][0][0] >= 20 and len(board["rows"]) > 10
        assert filled, f"the viewer was not filled after {time.monotonic() - t0:.0f}s"
        # every dashboard panel has data, from history and from the live traffic through the proxy
        for uid, n in (("llmtap-overview", 9), ("llmtap-errors", 8), ("llmtap-cost", 11)):
            for pid in range(1, n + 1):
                status, frame = post("/api/panel", {"uid": uid, "panel": pid})
                assert status == 200 and isinstance(frame, dict) and frame["rows"], (uid, pid, frame)
    finally:
        code = stop(proc, timeout=30)
    out = proc.stdout.read() if proc.stdout else ""
    assert code == 0, out
    assert "live traffic is flowing" in out
