"""Start and stop llmtap processes: the mock provider and the sidecar.

Used by the tests, the benchmarks and ``llmtap demo``: each process is a real
``python -m llmtap ...`` subprocess on 127.0.0.1, stopped with SIGTERM (then SIGKILL).
"""

from __future__ import annotations

import http.client
import json
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Environment

LLMTAP = [sys.executable, "-m", "llmtap"]
LLMTAP_PY = [sys.executable, "-m"]


_PORTS = random.SystemRandom()  # not the seedable module state: two test workers never draw the same sequence


def free_port() -> int:
    """A loopback port free now, below the kernel's ephemeral range.

    A port the kernel hands out for port 0 is an ephemeral one: once closed here, any process's next outgoing
    connection may take it as its local port before the server this port is for binds it (a parallel suite lost a
    sidecar start so: "the address is already in use"). Below that range only a server asking for that very port
    can take it."""
    low = 32768
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    if low > 2048:
        for _ in range(100):
            port = _PORTS.randrange(max(1024, low - 20000), low)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[Any], timeout: float = 20.0) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


@dataclass
class Mock:
    proc: subprocess.Popen[Any]
    port: int
    ca: Path

    def requests(self) -> list[dict[str, Any]]:
        return list(self._get("/_mock/requests"))

    def sockets(self) -> list[dict[str, Any]]:
        """The WebSockets the mock served: path, headers, and every payload received and sent."""
        return list(self._get("/_mock/ws"))

    def reset(self) -> None:
        """Empty the mock's request and WebSocket logs."""
        self._get("/_mock/reset")

    def _get(self, path: str) -> Any:
        import ssl

        ctx = ssl.create_default_context(cafile=str(self.ca))
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=10)
        conn.request("GET", path)
        data = json.loads(conn.getresponse().read())
        conn.close()
        return data


def start_mock(cert_dir: Path, env: dict[str, str] | None = None) -> Mock:
    proc = subprocess.Popen(
        [*LLMTAP, "mock-provider", "--listen", "127.0.0.1:0", "--cert-dir", str(cert_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**Environment.read().variables, **(env or {})},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        stop(proc)
        raise RuntimeError(f"mock provider failed: {proc.stderr.read() if proc.stderr else ''}")
    info = json.loads(line)
    return Mock(proc, int(info["port"]), Path(info["ca"]))


@dataclass
class Sidecar:
    proc: subprocess.Popen[Any]
    listen: int
    admin: int
    data_dir: Path
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    admin_token: str = ""  # given with --admin-token; else the install's token is read from the data dir

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.listen}"

    @property
    def bundle(self) -> Path:
        return self.data_dir / "ca-bundle.pem"

    def admin_request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    @property
    def token(self) -> str:
        """The install's admin token (``<data-dir>/admin-token``), or the one given with ``--admin-token``."""
        return self.admin_token or (self.data_dir / "admin-token").read_text().strip()

    def sql(self, query: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
        payload: dict[str, Any] = {"query": query, "format": "JSONEachRow"}
        if params:
            payload["params"] = params
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"}
        status, body = self.admin_request("POST", "/api/sql", json.dumps(payload).encode(), headers)
        assert status == 200, body
        return [json.loads(line) for line in body.splitlines() if line.strip()]

    def rows(self, where: str, n: int = 1, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Rows of llm_calls matching ``where``, waiting until ``n`` exist."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.sql(f"SELECT * FROM llm_calls WHERE {where} ORDER BY timestamp")
            if len(rows) >= n or time.monotonic() > deadline:
                return rows
            time.sleep(0.05)

    def row(self, session: str, timeout: float = 5.0) -> dict[str, Any]:
        rows = self.rows(f"session_id = '{session}'", 1, timeout)
        assert len(rows) == 1, f"expected one row for session {session}, got {rows}"
        return rows[0]


def wait_healthy(sc: Sidecar, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sc.proc.poll() is not None:
            raise RuntimeError(f"llmtap run exited with {sc.proc.returncode}: {sc.log.read_text()}")
        try:
            status, _ = sc.admin_request("GET", "/healthz")
            if status == 200:
                with socket.create_connection(("127.0.0.1", sc.listen), timeout=1):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"llmtap run did not become healthy: {sc.log.read_text()}")


def start_sidecar(
    data_dir: Path,
    mock: Mock | None,
    *extra: str,
    env: dict[str, str] | None = None,
    listen_port: int = 0,
    admin_port: int = 0,
    service: str = "",
) -> Sidecar:
    """``llmtap run`` on free loopback ports (or the ones given), dialing ``mock`` for the providers.

    Ports it chose that another process bound first (llmtap refuses to start: "already in use") are chosen again,
    twice at most."""
    for attempt in range(3):
        sc = _start_sidecar(data_dir, mock, extra, env, listen_port or free_port(), admin_port or free_port(), service)
        try:
            wait_healthy(sc)
            return sc
        except Exception as e:
            stop(sc.proc)
            if attempt == 2 or listen_port or admin_port or "already in use" not in str(e):
                raise
    raise AssertionError("unreachable")


def _start_sidecar(
    data_dir: Path,
    mock: Mock | None,
    extra: tuple[str, ...],
    env: dict[str, str] | None,
    listen: int,
    admin: int,
    service: str,
) -> Sidecar:
    if service:
        extra = (*extra, "--service", service)
    args = [
        *LLMTAP,
        "run",
        "--listen",
        f"127.0.0.1:{listen}",
        "--admin",
        f"127.0.0.1:{admin}",
        "--data-dir",
        str(data_dir),
    ]
    if mock is not None:
        args += ["--upstream-ca", str(mock.ca)]
        from .mock import HOSTS

        for host in HOSTS:
            args += ["--connect-to", f"{host}:443:127.0.0.1:{mock.port}"]
    args += list(extra)
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir.parent / f"{data_dir.name}.log"
    penv = {k: v for k, v in Environment.read().variables.items() if not k.upper().endswith("_PROXY")}
    penv.update(env or {})
    with open(log, "w") as f:
        proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=penv)
    sc = Sidecar(proc, listen, admin, data_dir, log)
    if "--admin-token" in extra:
        sc.admin_token = extra[list(extra).index("--admin-token") + 1]
    return sc


@dataclass
class ClickHouseHTTP:
    """:mod:`llmtap.testing.chhttp` in its own process (chDB allows one store per process)."""

    path: Path
    port: int
    user: str = "llmtap"
    password: str = "s3cret"
    proc: subprocess.Popen[Any] | None = None
    read_user: str = ""  # a second user whose queries the engine keeps read-only
    read_password: str = ""

    def start(self) -> ClickHouseHTTP:
        self.proc = subprocess.Popen(
            [
                *LLMTAP_PY,
                "llmtap.testing.chhttp",
                "--path",
                str(self.path),
                "--port",
                str(self.port),
                "--user",
                self.user,
                "--password",
                self.password,
                *(["--read-user", self.read_user, "--read-password", self.read_password] if self.read_user else []),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"chhttp failed: {self.proc.stderr.read() if self.proc.stderr else ''}")
        self.port = int(json.loads(line)["port"])
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None

    @property
    def url(self) -> str:
        return f"clickhouse://{self.user}:{self.password}@127.0.0.1:{self.port}/llmtap"

    @property
    def read_url(self) -> str:
        return f"clickhouse://{self.read_user}:{self.read_password}@127.0.0.1:{self.port}/llmtap"

    def log(self) -> list[tuple[str, str]]:
        """Who ran what: (user, the statement's first words), the last 500."""
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_chhttp/log", timeout=10) as r:
            return [tuple(x) for x in json.loads(r.read())]

    def client(self) -> Any:
        import clickhouse_connect

        return clickhouse_connect.get_client(
            host="127.0.0.1", port=self.port, username=self.user, password=self.password, compress=False
        )


def start_chhttp(path: Path, port: int = 0, user: str = "default", password: str = "") -> ClickHouseHTTP:
    """A ClickHouse-HTTP endpoint over chDB (:mod:`llmtap.testing.chhttp`) on 127.0.0.1, started."""
    return ClickHouseHTTP(path, port, user, password).start()
