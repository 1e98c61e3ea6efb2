"""py-spy during the benchmark: where llmtap's CPU goes, as inclusive shares of busy samples per function."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def py_spy() -> str | None:
    """py-spy on PATH or beside this Python (``.venv/bin``, from the ``bench`` extra); None when absent."""
    beside = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(beside) if beside.exists() else None)


def profile(pid: int, load: Callable[[], None], out: Path) -> list[tuple[str, float]]:
    """py-spy samples of ``pid`` (all threads) while ``load`` runs again and again for ~22 s."""
    spy = py_spy()
    assert spy, "checked by run.py before the run"
    rec = subprocess.Popen(
        [spy, "record", "-p", str(pid), "-r", "250", "-d", "25", "--format", "raw", "-o", str(out), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)
    deadline = time.time() + 22
    while time.time() < deadline:
        load()
    rec.wait(60)
    return summarize_profile(out)


# Frames every busy sample passes through (interpreter start-up, the event loop's and threads' own
# loops): listing them says nothing about where the time goes.
_ROOT_FRAMES = re.compile(
    r"^(<module>|_run_code|_run_module_as_main|main|cmd_run|run|Runner\.run|BaseEventLoop\.\w+|Handle\._run"
    r"|Thread\.(run|_bootstrap|_bootstrap_inner)) \((<frozen runpy>|asyncio/.*|threading\.py|cli\.py|cli/__init__\.py"
    r"|cli/tools\.py|app\.py|sidecar\.py|__main__\.py|intercept/worker\.py)\)$"
)


def summarize_profile(out: Path) -> list[tuple[str, float]]:
    """Inclusive share of busy samples per function (idle threads and the root frames left out)."""
    inclusive: dict[str, float] = {}
    total = 0.0
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = float(count)
        frames = stack.split(";")
        if any("epoll_wait" in f or "select (selectors" in f or "wait (threading" in f for f in frames[-2:]):
            continue  # idle threads
        total += n
        for name in {re.sub(r" \(.*?:\d+\)$", "", f).strip() + " (" + _module(f) + ")" for f in frames}:
            inclusive[name] = inclusive.get(name, 0.0) + n
    shown = ((k, v) for k, v in inclusive.items() if not _ROOT_FRAMES.match(k) and not k.startswith(" ("))
    top = sorted(shown, key=lambda kv: -kv[1])
    return [(k, 100 * v / total) for k, v in top if v / total > 0.03][:30]


def _module(frame: str) -> str:
    m = re.search(r"\((.*?):\d+\)", frame)
    if not m:
        return "?"
    path = m.group(1)
    for marker in ("site-packages/", "llmtap/", "lib/python3.12/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path
