"""What a hostile peer costs the sidecar, measured from outside: its memory, and how late another stream's
events (and ``/healthz``) arrive meanwhile."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

from llmtap.testing.harness import Sidecar
from llmtap.testing.rawclient import request

CHAT = "/v1/chat/completions"
KILL_ABOVE = 1 << 30  # a sidecar that grows this much is killed: a regression fails the test, not the machine


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the sidecar's supervisor and its proxy workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except OSError:
                pass
    return out


class RSS:
    """The sidecar's resident memory (its supervisor and proxy workers together), sampled every 10 ms from
    /proc; past ``kill_above`` bytes the supervisor is killed (SIGKILL: its workers die with it) so that an
    unbounded regression cannot take the (shared) machine's memory."""

    def __init__(self, pid: int, kill_above: int = 0) -> None:
        self.pid = pid
        self.max = 0
        self.kill_above = kill_above
        self.killed = False
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def now(self) -> int:
        total = 0
        for pid in tree(self.pid):
            try:
                lines = Path(f"/proc/{pid}/status").read_text().splitlines()
            except OSError:
                continue  # gone meanwhile
            total += next((int(x.split()[1]) * 1024 for x in lines if x.startswith("VmRSS:")), 0)
        if not total:
            raise OSError(f"process {self.pid} is gone")
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.max = max(self.max, self.now())
            except OSError:
                return  # the process is gone
            if self.kill_above and self.max > self.kill_above and not self.killed:
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)
            time.sleep(0.01)

    def __enter__(self) -> RSS:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def paced_lateness(sc: Sidecar, events: int = 80, gap_ms: int = 40) -> list[float]:
    """How late each event of a paced stream arrives (arrival - the mock's send stamp), in seconds."""
    r = request(
        "api.openai.com",
        443,
        CHAT,
        {"model": "gpt-4o", "stream": True, "messages": []},
        {"x-mock-events": str(events), "x-mock-delay-ms": str(gap_ms), "x-mock-stamp": "1"},
        sc.bundle,
        proxy=("127.0.0.1", sc.listen),
    )
    assert r.status == 200
    late = []
    for arrived, data in r.chunks:
        for sent in re.findall(rb"sent_at=([0-9.]+)", data):
            late.append(arrived - float(sent))
    assert len(late) >= events
    return late


class Healthz:
    """``GET /healthz`` every 50 ms while it runs: each answer's status and how long it took."""

    def __init__(self, sc: Sidecar) -> None:
        self.sc = sc
        self.answers: list[tuple[int, float]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                status, _ = self.sc.admin_request("GET", "/healthz")
            except OSError:
                status = 0
            self.answers.append((status, time.monotonic() - t0))
            self._stop.wait(0.05)

    @property
    def worst(self) -> float:
        return max((t for _, t in self.answers), default=0.0)

    def __enter__(self) -> Healthz:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
