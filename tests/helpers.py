"""Process fixtures and clients shared by the end-to-end tests."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

LLMTAP = [sys.executable, "-m", "llmtap"]


def free_port() -> int:
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
        import ssl

        ctx = ssl.create_default_context(cafile=str(self.ca))
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=10)
        conn.request("GET", "/_mock/requests")
        data = json.loads(conn.getresponse().read())
        conn.close()
        return list(data)


def start_mock(cert_dir: Path) -> Mock:
    proc = subprocess.Popen(
        [*LLMTAP, "mock-provider", "--listen", "127.0.0.1:0", "--cert-dir", str(cert_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
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

    def sql(self, query: str) -> list[dict[str, Any]]:
        status, body = self.admin_request("POST", "/api/sql?format=JSONEachRow", query.encode())
        assert status == 200, body
        return [json.loads(line) for line in body.splitlines() if line.strip()]

    def rows(self, where: str, n: int = 1, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Rows of llm_calls matching ``where``, waiting until ``n`` exist (a call is queryable within 2 s)."""
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


def start_sidecar(data_dir: Path, mock: Mock | None, *extra: str, env: dict[str, str] | None = None) -> Sidecar:
    listen, admin = free_port(), free_port()
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
        for host in ("api.openai.com", "api.anthropic.com"):
            args += ["--connect-to", f"{host}:443:127.0.0.1:{mock.port}"]
    args += list(extra)
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir.parent / f"{data_dir.name}.log"
    penv = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    penv.update(env or {})
    with open(log, "w") as f:
        proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=penv)
    sc = Sidecar(proc, listen, admin, data_dir, log)
    try:
        wait_healthy(sc)
    except Exception:
        stop(proc)
        raise
    return sc


def session_id() -> str:
    return uuid.uuid4().hex


class OtlpReceiver:
    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.spans: list[tuple[dict[str, str], Span]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append(body)
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                for rs in req.resource_spans:
                    res = {a.key: a.value.string_value for a in rs.resource.attributes}
                    for ss in rs.scope_spans:
                        for sp in ss.spans:
                            outer.spans.append((res | {"scope": ss.scope.name}, sp))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def span(self, span_id: str, timeout: float = 10.0) -> tuple[dict[str, str], Span]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for res, sp in self.spans:
                if sp.span_id.hex() == span_id:
                    return res, sp
            time.sleep(0.05)
        raise AssertionError(f"no span {span_id} received")

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@dataclass
class ClickHouseHTTP:
    """tests/chhttp.py in its own process (chDB allows one store per process)."""

    path: Path
    port: int
    user: str = "llmtap"
    password: str = "s3cret"
    proc: subprocess.Popen[Any] | None = None

    def start(self) -> ClickHouseHTTP:
        script = Path(__file__).with_name("chhttp.py")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(script),
                "--path",
                str(self.path),
                "--port",
                str(self.port),
                "--user",
                self.user,
                "--password",
                self.password,
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

    def client(self) -> Any:
        import clickhouse_connect

        return clickhouse_connect.get_client(
            host="127.0.0.1", port=self.port, username=self.user, password=self.password, compress=False
        )
