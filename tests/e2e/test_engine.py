"""The embedded engine in a process of its own (``store/engine.py``): it answers as the in-process engine
does, stops when idle, comes back on the next request, survives its own death, and never outlives its
parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from llmtap.store import rowbinary
from llmtap.store.engine import EngineClient
from llmtap.telemetry.semconv import otel_traces_row
from llmtap.testing import builders

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def rows(n: int, feature: str) -> list[bytes]:
    out = []
    for i in range(n):
        r = builders.sample_record()
        r.feature, r.span_id, r.trace_id = feature, f"{i:016x}", f"{i:032x}"
        out.append(rowbinary.encode(otel_traces_row(r)))
    return out


def count(engine: EngineClient, feature: str) -> int:
    out = engine.read(f"SELECT count() AS n FROM llm_calls WHERE feature = '{feature}'", "TSV")
    return int(out.strip() or 0)


def test_the_engine_process_answers_stops_when_idle_and_comes_back(tmp_path: Path) -> None:
    engine = EngineClient(tmp_path / "store", "llmtap", idle_s=1.0)
    try:
        engine.start()
        assert engine.running and (tmp_path / "store" / "metadata").is_dir()  # the store exists from the start
        engine.insert_rows(rows(50, "a"), "batch-a")
        engine.insert_rows(rows(50, "a"), "batch-a")  # the same batch again (a retry): stored once
        assert count(engine, "a") == 50
        assert "llm_calls" in engine.canonical("SELECT * FROM llm_calls")
        deadline = time.monotonic() + 15
        while engine.running and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not engine.running  # idle: its memory is given back
        started = engine.starts
        assert count(engine, "a") == 50  # the next request starts it again, on the same store
        assert engine.starts == started + 1
    finally:
        engine.close()
    assert not engine.running


def test_an_engine_that_dies_is_started_again(tmp_path: Path) -> None:
    engine = EngineClient(tmp_path / "store", "llmtap")
    try:
        engine.start()
        engine.insert_rows(rows(10, "b"), "batch-b")
        assert engine._engine is not None
        dead = engine._engine.proc
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait(10)
        assert count(engine, "b") == 10  # the next request has a new engine, on the same store
        assert engine._engine is not None and engine._engine.proc is not dead
    finally:
        engine.close()


def test_an_engine_started_by_a_thread_that_ends_serves_the_next_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kernel's parent-death signal follows the thread that started a child, not its process: the viewer's
    store probe (a thread per probe) started the engine after an idle stop, ended, and took the engine — and
    the page's other reads on it ("the engine process stopped": the CI failure of stop 35)."""
    engine = EngineClient(tmp_path / "store", "llmtap")
    try:
        starter = threading.Thread(target=engine.start)
        starter.start()
        starter.join()
        task = Path(f"/proc/self/task/{starter.native_id}")
        deadline = time.monotonic() + 10
        while task.exists() and time.monotonic() < deadline:  # gone from the kernel: its end has been signalled
            time.sleep(0.01)
        assert not task.exists()
        assert engine._engine is not None
        first = engine._engine.proc
        assert count(engine, "c") == 0  # answered by the engine that thread started
        assert engine.starts == 1 and engine._engine.proc is first and first.poll() is None
        assert "stopped on its own" not in caplog.text
    finally:
        engine.close()


def test_an_engine_that_dies_on_its_own_is_logged_with_its_status(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = EngineClient(tmp_path / "store", "llmtap")
    try:
        engine.start()
        assert engine._engine is not None
        dead = engine._engine.proc
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait(10)
        assert count(engine, "d") == 0
        said = f"the store's engine (pid {dead.pid}) stopped on its own (killed by signal 9)"
        deadline = time.monotonic() + 10
        while said not in caplog.text and time.monotonic() < deadline:  # logged by its reader thread
            time.sleep(0.05)
        assert said in caplog.text
    finally:
        engine.close()
    assert "stopped on its own" not in caplog.text.split("killed by signal 9", 1)[1]  # closing it is not "on its own"


def test_the_engine_dies_with_its_parent(tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from llmtap.store.engine import EngineClient\n"
        f"e = EngineClient(Path({str(tmp_path / 'store')!r}), 'llmtap'); e.start()\n"
        "print(e._engine.proc.pid, flush=True); time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{child}").exists(), "the engine outlived the sidecar"
    finally:
        if parent.poll() is None:
            parent.kill()
