"""The embedded engine in a process of its own, started when it is needed and stopped when it is not.

chDB is the ClickHouse engine as a shared library: loaded, it is most of a sidecar's memory (its
code alone is ~150 MB resident, and its caches and allocator add as much). The recording does not
need it: records wait in the durable spool as the RowBinary rows the engine ingests. So the sidecar
runs the engine as a child process (``python -m llmtap.store.engine``) that :class:`EngineClient`
starts on demand — to ingest what the spool holds (the writer's batches, every
:data:`INGEST_INTERVAL_S` or :data:`INGEST_ROWS`, and before every read), and to answer reads (the
admin API, the viewer, the alert rules) — and stops once nothing has asked for
:data:`IDLE_S`. Between ingests the sidecar holds the proxy and the recorder only.

:class:`EngineClient` is a :class:`~llmtap.store.backend.Backend`: the engine process serves a
:class:`~llmtap.store.embedded.ChdbBackend` on the same path, method for method, over a socketpair
(``marshal`` frames between two llmtap processes: a request id, the method, its arguments; the
answer or the error). Reads run concurrently in the engine as they did in-process; an insert's rows
travel as a file the engine reads (``file(..., RowBinary)``), not through the socket.

The engine dies with the supervisor (``PR_SET_PDEATHSIG``). The kernel sends that signal when the
*thread* that started the child ends, not the process: so every engine is started from one thread
the client keeps for its whole life, never from the thread that happened to ask (a request's thread,
the store probe's), whose end would kill an engine other requests are using. If the engine dies on
its own, that is logged with its exit status, what was asked of it fails (the writer retries its
batch, a read answers an error) and the next request starts a new one.
"""

from __future__ import annotations

import itertools
import json
import logging
import marshal
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..errors import LlmtapError
from .readonly import QueryLimits

log = logging.getLogger("llmtap.store")

IDLE_S = 30.0  # the engine stops after this long without a request
INGEST_INTERVAL_S = 300.0  # the writer's linger with an engine started on demand
INGEST_ROWS = 50_000  # ... and its batch size
START_TIMEOUT_S = 120.0
_LEN = struct.Struct("<I")
_ERRORS: dict[str, type[Exception]] = {
    e.__name__: e for e in (ValueError, TimeoutError, KeyError, FileNotFoundError, PermissionError, OSError)
}


class EngineError(LlmtapError, RuntimeError):
    """An error the engine raised (its message kept whole: ``Code: N. ...``), or its process not answering."""


class EngineGone(EngineError, ConnectionError):
    """The engine process stopped, did not start or is not answering: the store is away (a reader answers
    "store unreachable", the SQL guard gives no verdict on the query), not the query wrong."""


def _send(sock: socket.socket, lock: threading.Lock, obj: Any) -> None:
    data = marshal.dumps(obj)
    with lock:
        sock.sendall(_LEN.pack(len(data)) + data)


def _recv(sock: socket.socket) -> Any:
    head = _exactly(sock, 4)
    return marshal.loads(_exactly(sock, _LEN.unpack(head)[0]))


def _exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        got = sock.recv(min(n - len(buf), 1 << 20))
        if not got:
            raise ConnectionError("the engine's channel closed")
        buf += got
    return bytes(buf)


class _Process:
    """One engine process and the requests waiting for its answers."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.proc, self.sock = proc, sock
        self.pending: dict[int, Future[Any]] = {}
        self.send_lock = threading.Lock()
        self.stopping = False  # the client asked it to stop (idle, or closed)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def answers(self, lock: threading.Lock) -> None:
        """Its answers, to the requests that wait for them; when it stops, what it had not answered fails."""
        try:
            while True:
                rid, ok, value = _recv(self.sock)
                with lock:
                    fut = self.pending.pop(rid, None)
                if fut is None:
                    continue
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(_error(value))
        except (OSError, ValueError, EOFError) as e:
            why = e
        with lock:
            waiting, self.pending = list(self.pending.values()), {}
        for fut in waiting:
            fut.set_exception(EngineGone("the engine process stopped"))
        self.sock.close()
        if not self.stopping:
            try:
                code = self.proc.wait(5)
                status = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            except subprocess.TimeoutExpired:
                status = f"still running, its channel lost: {why}"
            log.warning(
                "the store's engine (pid %d) stopped on its own (%s); %d request(s) failed, the next starts it again",
                self.proc.pid,
                status,
                len(waiting),
            )


class EngineClient:
    """The supervisor's handle on the engine process (thread-safe: the writer and every reader share it)."""

    def __init__(
        self,
        path: Path,
        db: str,
        retention: dict[str, int] | None = None,
        limits: QueryLimits | None = None,
        idle_s: float = IDLE_S,
    ) -> None:
        self.path, self.db, self.retention, self.idle_s = path, db, retention or {}, idle_s
        self.limits = limits or QueryLimits()
        self._lock = threading.Lock()  # the current process, its requests, starting and stopping
        self._engine: _Process | None = None
        self._ids = itertools.count(1)
        self._busy = 0
        self._last = time.monotonic()
        self._closed = False
        self._names: frozenset[str] | None = None
        # the one thread every engine is started from: it lives as long as this client (PR_SET_PDEATHSIG)
        self._starter = ThreadPoolExecutor(1, thread_name_prefix="llmtap-engine-start")
        self.starts = 0  # how many times the engine was started (the benchmark reports it)
        self._idle = threading.Thread(target=self._stop_when_idle, name="llmtap-engine-idle", daemon=True)
        self._idle.start()

    # -- the Backend face ---------------------------------------------------------------------------
    def insert_rows(self, rows: list[bytes], token: str) -> None:
        if not rows:
            return
        staged = self.path / f"insert-{os.getpid()}-{next(self._ids)}.rowbinary"
        staged.write_bytes(b"".join(rows))
        try:
            self._call("insert_file", str(staged), token)
        finally:
            staged.unlink(missing_ok=True)

    def query(self, sql: str, fmt: str = "JSONEachRow", params: dict[str, str] | None = None) -> bytes:
        return bytes(self._call("query", sql, fmt, params))

    def canonical(self, sql: str) -> str:
        return str(self._call("canonical", sql))

    def syntax_tree(self, sql: str) -> dict[str, Any] | None:
        tree = self._call("syntax_tree", sql)
        return tree if isinstance(tree, dict) else None

    def engine_names(self) -> frozenset[str]:
        if self._names is None:  # the engine's functions do not change while it is installed: asked once
            self._names = frozenset(self._call("engine_names"))
        return self._names

    def read(self, sql: str, fmt: str = "JSONEachRow", params: Mapping[str, str] | None = None, tag: str = "") -> bytes:
        return bytes(self._call("read", sql, fmt, dict(params) if params else None, tag))

    def cancel(self, tag: str = "") -> None:
        if self.running:  # nothing runs in an engine that is not there
            self._call("cancel", tag)

    def close(self) -> None:
        self._closed = True
        self._stop()
        self._starter.shutdown(wait=False)

    @property
    def running(self) -> bool:
        engine = self._engine
        return engine is not None and engine.alive

    def start(self) -> None:
        """Start the engine now (at start-up: the store is created or upgraded, and any error is seen)."""
        with self._lock:
            self._ensure()

    # -- plumbing -----------------------------------------------------------------------------------
    def _call(self, method: str, *args: Any) -> Any:
        with self._lock:
            if self._closed:
                raise EngineGone("the store is closed")
            engine = self._ensure()
            rid = next(self._ids)
            fut: Future[Any] = Future()
            engine.pending[rid] = fut
            self._busy += 1
        try:
            _send(engine.sock, engine.send_lock, (rid, method, args))
            return fut.result()
        except OSError as e:
            raise EngineGone(f"the engine process is not answering ({e})") from None
        finally:
            with self._lock:
                engine.pending.pop(rid, None)
                self._busy -= 1
                self._last = time.monotonic()

    def _ensure(self) -> _Process:
        """The running engine, started if need be (the caller holds the lock)."""
        if self._engine is not None and self._engine.alive:
            return self._engine
        ours, theirs = socket.socketpair()
        settings = json.dumps(
            {"path": str(self.path), "db": self.db, "retention": self.retention, "limits": asdict(self.limits)}
        )
        proc = self._starter.submit(
            subprocess.Popen,
            [sys.executable, "-m", "llmtap.store.engine", str(theirs.fileno()), settings],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        ).result()
        theirs.close()
        ours.settimeout(START_TIMEOUT_S)
        try:
            ok, value = _recv(ours)
        except (OSError, ValueError, EOFError) as e:
            proc.kill()
            proc.wait()
            raise EngineGone(f"the store's engine did not start ({e})") from None
        if not ok:
            proc.wait()
            raise _error(value)
        ours.settimeout(None)
        engine = self._engine = _Process(proc, ours)
        self.starts += 1
        threading.Thread(target=engine.answers, args=(self._lock,), name="llmtap-engine", daemon=True).start()
        return engine

    def _stop_when_idle(self) -> None:
        while not self._closed:
            time.sleep(min(self.idle_s, 1.0))
            self._stop(idle_only=True)

    def _stop(self, idle_only: bool = False) -> None:
        with self._lock:
            engine = self._engine
            if engine is None:
                return
            if idle_only and (self._busy or time.monotonic() - self._last < self.idle_s):
                return
            self._engine = None
            engine.stopping = True
        try:
            _send(engine.sock, engine.send_lock, (0, "close", ()))
            engine.proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            engine.proc.kill()
            engine.proc.wait()


def _error(value: Any) -> Exception:
    name, message = value
    return _ERRORS.get(name, EngineError)(message)


# -- the engine process -----------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    from ..startup import die_with_parent

    die_with_parent()
    sock = socket.socket(fileno=int(argv[0]))
    settings = json.loads(argv[1])
    lock = threading.Lock()
    try:
        from .embedded import ChdbBackend

        limits = QueryLimits(**settings["limits"])
        backend = ChdbBackend(Path(settings["path"]), settings["db"], settings["retention"], limits)
    except Exception as e:
        _send(sock, lock, (False, (type(e).__name__, str(e))))
        return 1
    _send(sock, lock, (True, None))
    pool = ThreadPoolExecutor(8, thread_name_prefix="llmtap-engine")

    def run(rid: int, method: str, args: tuple[Any, ...]) -> None:
        try:
            value = getattr(backend, method)(*args)
            answer: Any = (rid, True, value)
        except Exception as e:
            answer = (rid, False, (type(e).__name__, str(e)))
        try:
            _send(sock, lock, answer)
        except OSError:
            pass

    try:
        while True:
            rid, method, args = _recv(sock)
            if method == "close":
                break
            if method not in ("insert_file", "query", "canonical", "syntax_tree", "engine_names", "read", "cancel"):
                _send(sock, lock, (rid, False, ("ValueError", f"no such engine method {method!r}")))
                continue
            pool.submit(run, rid, method, args)
    except (OSError, EOFError, ValueError):
        pass  # the supervisor is gone
    pool.shutdown(wait=True, cancel_futures=False)
    backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
