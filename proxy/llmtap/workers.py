"""The supervisor's side of the proxy workers: start them, read what they hand off, stop them.

``llmtap run`` binds the proxy's port once and runs ``--workers`` proxy processes
(:mod:`llmtap.intercept.worker`) that accept on that one socket: the kernel spreads client
connections over them, so the traffic uses every core while the recording (the recorder, the
pipeline, the store writer), the admin API and the alerts run once, here. Each worker talks to
the supervisor over its own socketpair: its settings go out first, then its :mod:`llmtap.handoff`
batches come back and are handed to the :class:`~llmtap.capture.recorder.Recorder` as they
arrive, on the supervisor's event loop.

Guarantees, as with one process: a SIGTERM drains every worker (each stops accepting, lets its
calls finish up to ``--drain-timeout``, records the rest as cut, and exits) before the pipeline
flushes; a SIGKILLed supervisor takes its workers with it (they hold nothing to lose: every call
they finished was handed off); a worker that dies is restarted, and its calls in flight are recorded
as cut by the sidecar. ``/healthz`` sums the workers' states.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from . import handoff
from .capture.recorder import Recorder
from .intercept.worker import WorkerSettings
from .startup import StartupError

log = logging.getLogger("llmtap.workers")

START_TIMEOUT_S = 60.0
RESTART_DELAY_S = 1.0
STOP_GRACE_S = 10.0  # beyond the drain timeout: the workers' own close-wait, then SIGKILL


def default_workers() -> int:
    """One worker per core this process may use (its CPU affinity and its cgroup's quota), at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:  # cgroup v2: "max 100000" or "200000 100000" (quota period)
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(-(-int(quota) // int(period)))))
    except (OSError, ValueError):
        pass
    return max(1, min(cores, 4))


@dataclass
class Worker:
    index: int
    proc: subprocess.Popen[bytes]
    channel: socket.socket
    decoder: handoff.Decoder = field(default_factory=handoff.Decoder)
    state: handoff.WorkerState | None = None
    counted: dict[str, int] = field(default_factory=dict)  # dropped connections already counted
    barrier: int = 0  # the last barrier it echoed


class Workers:
    def __init__(
        self,
        settings: WorkerSettings,
        count: int,
        listener: socket.socket,
        recorder: Recorder,
        on_dropped: Callable[[str, int], None] | None = None,
        on_fatal: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.count = count
        self.listener = listener
        self.recorder = recorder
        self._on_dropped = on_dropped
        self._on_fatal = on_fatal  # a worker that ran, then could not go on (local mode's redirector gave up)
        self.workers: dict[int, Worker] = {}
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._barrier = 0

    # -- life -------------------------------------------------------------------------------------
    def _spawn(self, index: int) -> Worker:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        proc = subprocess.Popen(
            [sys.executable, "-m", "llmtap.intercept.worker", str(theirs.fileno()), str(self.listener.fileno())],
            pass_fds=(theirs.fileno(), self.listener.fileno()),
            process_group=0,  # terminal signals reach the supervisor only; it tells the workers
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        ours.sendall(replace(self.settings, index=index).to_bytes())
        ours.setblocking(False)
        w = Worker(index, proc, ours)
        self.workers[index] = w
        assert self._loop is not None
        self._loop.add_reader(ours.fileno(), self._readable, w)
        return w

    async def start(self) -> None:
        """Start every worker; returns once all accept connections. A worker that cannot start makes it a
        :class:`StartupError` (its one line)."""
        self._loop = asyncio.get_running_loop()
        for i in range(self.count):
            self._spawn(i)
        deadline = self._loop.time() + START_TIMEOUT_S
        while True:
            for w in self.workers.values():
                if w.state is not None and w.state.startup_error:
                    await self.stop(at_once=True)
                    raise StartupError(w.state.startup_error)
                if w.proc.poll() is not None and (w.state is None or not w.state.running):
                    await self.stop(at_once=True)
                    raise StartupError(f"--listen: the proxy worker exited at start (status {w.proc.returncode})")
            if all(w.state is not None and w.state.running for w in self.workers.values()):
                return
            if self._loop.time() > deadline:
                await self.stop(at_once=True)
                raise StartupError(f"--listen: the proxy did not start within {START_TIMEOUT_S:.0f}s")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), 0.5)
            except TimeoutError:
                pass

    def _readable(self, w: Worker) -> None:
        try:
            data = w.channel.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._gone(w)
            return
        try:
            messages = w.decoder.feed(data)
        except Exception:
            log.exception("worker %d sent a broken batch: restarting it", w.index)
            w.proc.kill()
            self._gone(w)
            return
        calls = [m for m in messages if not isinstance(m, (handoff.WorkerState, handoff.Barrier))]
        if calls:
            self.recorder.handle(w.index, calls)
        for m in messages:
            if isinstance(m, handoff.WorkerState):
                self._state(w, m)
            elif isinstance(m, handoff.Barrier):
                w.barrier = m.seq
                self._changed.set()

    def _state(self, w: Worker, state: handoff.WorkerState) -> None:
        w.state = state
        if state.startup_error and not self.stopping and self._on_fatal is not None:
            self._on_fatal(state.startup_error)
        if self._on_dropped is not None:
            for reason, n in state.dropped.items():
                new = n - w.counted.get(reason, 0)
                if new > 0:
                    self._on_dropped(reason, new)
                    w.counted[reason] = n
        self._changed.set()

    def _gone(self, w: Worker) -> None:
        assert self._loop is not None
        self._loop.remove_reader(w.channel.fileno())
        w.channel.close()
        if self.workers.get(w.index) is w:
            del self.workers[w.index]
        cut = self.recorder.worker_gone(w.index, "the proxy worker stopped before the call ended")
        try:
            code = w.proc.wait(timeout=5)  # its channel closed: it is exiting
        except subprocess.TimeoutExpired:
            w.proc.kill()
            code = w.proc.wait()
        self._changed.set()
        if self.stopping or (w.state is not None and w.state.startup_error):
            return
        log.error(
            "proxy worker %d stopped (status %s)%s: starting a new one",
            w.index, code, f"; {cut} calls in flight recorded as cut" if cut else "",
        )  # fmt: skip
        self._loop.call_later(RESTART_DELAY_S, self._respawn, w.index)

    def _respawn(self, index: int) -> None:
        if not self.stopping and index not in self.workers:
            self._spawn(index)

    async def stop(self, at_once: bool = False) -> None:
        """Drain every worker (SIGTERM) and wait until they are gone; called again (a second signal), or
        ``at_once``, the workers cut their calls at once."""
        first = not self.stopping
        self.stopping = True
        for w in list(self.workers.values()):
            if w.proc.poll() is None:
                for _ in range(2 if at_once and first else 1):
                    w.proc.send_signal(signal.SIGTERM)
        if not first:
            return
        assert self._loop is not None
        deadline = self._loop.time() + (0 if at_once else self.settings.drain_timeout) + STOP_GRACE_S
        while self.workers and self._loop.time() < deadline:
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), 0.1)
            except TimeoutError:
                pass
        for w in list(self.workers.values()):  # still there: killed; what they held is recorded as cut
            w.proc.kill()
            self._gone(w)

    async def barrier(self, timeout: float) -> bool:
        """Once every worker has echoed a new barrier, the recorder has every call they had finished."""
        self._barrier += 1
        seq = self._barrier
        waiting = list(self.workers.values())
        for w in waiting:
            try:
                w.channel.send(handoff.encode([handoff.Barrier(seq)]))  # a few bytes: never blocks
            except OSError:
                pass
        assert self._loop is not None
        deadline = self._loop.time() + timeout
        while any(w.barrier < seq and self.workers.get(w.index) is w for w in waiting):
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.1))
            except TimeoutError:
                pass
        return True

    def settle(self, timeout: float = 2.0) -> bool:
        """:meth:`barrier` from another thread (a read, on the admin server's)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return False
        try:
            return asyncio.run_coroutine_threadsafe(self.barrier(timeout), loop).result(timeout + 1)
        except Exception:
            return False

    # -- health -----------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        states = [w.state for w in self.workers.values()]
        known = [s for s in states if s is not None]
        return {
            "running": len(known) == self.count and all(s.running for s in known),
            "draining": self.stopping or any(s.draining for s in known),
            "inflight_calls": sum(s.inflight for s in known),
            "open_websockets": sum(s.open_websockets for s in known),
            "event_loop_tasks": sum(s.loop_tasks for s in known) if known else None,
            "client_connections": sum(s.client_connections for s in known),
            "workers": len(known),
        }
