"""The proxy probed as an attacker would (issue #19, findings 3 and 6): the admin API and other local
services through the proxy, descriptor exhaustion, idle and slow clients."""

from __future__ import annotations

import json
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Mock, Sidecar, openai_client, session_id, start_sidecar, stop
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def connect_status(sc: Sidecar, target: str) -> int:
    """The proxy's answer to ``CONNECT target`` (0: it closed the connection instead)."""
    s = socket.create_connection(("127.0.0.1", sc.listen), timeout=10)
    try:
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = s.recv(4096)
        if not head:
            return 0
        status = int(head.split(b" ", 2)[1])
        if status == 200:  # a tunnel: does it reach anything?
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
            return 200 if data else 0
        return status
    except (ConnectionError, TimeoutError):
        return 0
    finally:
        s.close()


def absolute_get(sc: Sidecar, url: str) -> tuple[int, bytes]:
    s = socket.create_connection(("127.0.0.1", sc.listen), timeout=10)
    try:
        s.sendall(f"GET {url} HTTP/1.1\r\nHost: {url.split('/')[2]}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        return (int(data.split(b" ", 2)[1]) if data else 0), data
    except (ConnectionError, TimeoutError):
        return 0, b""
    finally:
        s.close()


class Listener:
    """A local TCP service that records whether anyone reached it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
                self.hits += 1
                c.close()
            except OSError:
                pass

    def close(self) -> None:
        self._stop.set()
        self._t.join()
        self.sock.close()


def test_the_admin_port_and_loopback_services_are_refused_through_the_proxy(sidecar: Sidecar) -> None:
    """Finding 3: proxy users reached the loopback-only admin API through the proxy (CONNECT or a plain request)."""
    for target in (f"127.0.0.1:{sidecar.admin}", f"localhost:{sidecar.admin}", f"127.7.7.7:{sidecar.admin}",
                   f"[::1]:{sidecar.admin}", f"0.0.0.0:{sidecar.admin}"):  # fmt: skip
        assert connect_status(sidecar, target) in (0, 403), target
    for url in (f"http://127.0.0.1:{sidecar.admin}/healthz", f"http://localhost:{sidecar.admin}/api/dashboards"):
        status, body = absolute_get(sidecar, url)
        assert status != 200 and b'"status"' not in body, url
    other = Listener()
    try:
        assert connect_status(sidecar, f"127.0.0.1:{other.port}") in (0, 403)
        status, _ = absolute_get(sidecar, f"http://127.0.0.1:{other.port}/")
        assert status != 200
        time.sleep(0.3)
        assert other.hits == 0  # not even a TCP handshake reached it
    finally:
        other.close()


def test_a_loopback_upstream_intercepted_on_purpose_still_works(mock: Mock, tmp_path: Path) -> None:
    """The refusal spares what the operator asked for: ``--intercept 127.0.0.1:PORT`` (vLLM, Ollama on loopback)."""
    sc = start_sidecar(tmp_path / "data", mock, "--intercept", f"127.0.0.1:{mock.port}")
    try:
        from llmtap.testing.rawclient import request

        sid = session_id()
        r = request(
            "127.0.0.1",
            mock.port,
            "/v1/chat/completions",
            {"model": "gpt-4o", "messages": []},
            {"x-llmtap-session": sid},
            sc.bundle,
            proxy=("127.0.0.1", sc.listen),
        )
        assert r.status == 200
        assert sc.row(sid)["status_code"] == 200
    finally:
        stop(sc.proc)


@pytest.fixture
def low_nofile() -> Iterator[None]:
    """A sidecar started from here inherits a soft open-file limit of 1,024, as from many shells and units."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _metric(sc: Sidecar, name: str, **labels: str) -> float:
    _, body = sc.admin_request("GET", "/metrics")
    return sum(
        s.value
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_2000_idle_connections_leave_healthz_and_a_call_working(mock: Mock, tmp_path: Path, low_nofile: None) -> None:
    """Finding 6: ~1,000 idle client connections (inherited soft limit 1,024) took the proxy and /healthz down,
    and the log grew ~30 MB/min of EMFILE tracebacks."""
    sc = start_sidecar(tmp_path / "data", mock)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # this test process needs the sockets itself
    socks = []
    try:
        for _ in range(2000):
            socks.append(socket.create_connection(("127.0.0.1", sc.listen), timeout=10))
        time.sleep(1.0)
        status, body = sc.admin_request("GET", "/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"
        sid = session_id()
        openai_client(sc).embeddings.create(
            model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-session": sid}
        )
        assert sc.row(sid)["status_code"] == 200
        assert _metric(sc, "llmtap_client_connections") >= 2000
        assert sc.log.stat().st_size < 200_000
    finally:
        for s in socks:
            s.close()
        stop(sc.proc)


def test_out_of_descriptors_the_log_gets_one_line_per_10s(mock: Mock, tmp_path: Path) -> None:
    """Issue #26: with descriptors exhausted the log got tracebacks by the thousand (mitmproxy's loop handler
    replaced llmtap's, the admin server's loop had none); docs/security.md promises one line per 10 s."""
    import os

    from probes import tree

    sc = start_sidecar(tmp_path / "data", mock, "--workers", "1")
    pids = tree(sc.proc.pid)  # the supervisor (admin server) and its proxy worker
    limits = {pid: resource.prlimit(pid, resource.RLIMIT_NOFILE) for pid in pids}
    socks: list[socket.socket] = []
    try:
        for pid, (_, hard) in limits.items():
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (len(os.listdir(f"/proc/{pid}/fd")) + 30, hard))
        before = sc.log.stat().st_size
        for port in (sc.listen, sc.admin):  # both listeners run out: the proxy's loop and the admin server's
            for _ in range(100):
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(4.0)  # asyncio retries accept() every second, up to the whole backlog each time
        grown = sc.log.read_bytes()[before:].decode(errors="replace")
        assert "Traceback" not in grown, grown[:2000]
        lines = [line for line in grown.splitlines() if "Too many open files" in line]
        assert 1 <= len(lines) <= len(pids), grown[:2000]  # one per process at most
        assert all("cannot accept connections" in line for line in lines), grown[:2000]
        for s in socks:
            s.close()
        socks = []
        for pid, limit in limits.items():
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limit)
        assert _healthy_within(sc, 10.0)  # accept() resumes by itself
    finally:
        for s in socks:
            s.close()
        stop(sc.proc)


def _healthy_within(sc: Sidecar, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sc.admin_request("GET", "/healthz")[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def test_idle_and_slow_clients_are_dropped_and_counted(mock: Mock, tmp_path: Path) -> None:
    """A cap on client connections (the longest idle closed for a new one) and a deadline for the first request."""
    sc = start_sidecar(tmp_path / "data", mock, "--max-client-connections", "100", "--client-header-timeout", "2")
    socks = []
    try:
        t0 = time.monotonic()
        for _ in range(150):
            s = socket.create_connection(("127.0.0.1", sc.listen), timeout=10)
            s.sendall(b"GET http://example.invalid/ HTTP/1.1\r\nHost: exa")  # never finished
            socks.append(s)
        sid = session_id()
        openai_client(sc).embeddings.create(
            model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-session": sid}
        )
        assert sc.row(sid)["status_code"] == 200
        evicted = _metric(sc, "llmtap_client_connections_dropped_total", reason="evicted_idle")
        if time.monotonic() - t0 < 2:  # all of it inside the header deadline: only the cap can have dropped them
            assert evicted >= 50
        else:  # a busy machine: some of the first ones reached their deadline before the cap was hit
            timed_out = _metric(sc, "llmtap_client_connections_dropped_total", reason="header_timeout")
            assert evicted + timed_out >= 50, (evicted, timed_out)
        time.sleep(3)
        closed = 0
        for s in socks:
            s.settimeout(0.2)
            try:
                closed += s.recv(1) == b""
            except ConnectionError:  # reset: closed with our bytes unread
                closed += 1
            except TimeoutError:  # still open
                pass
        assert closed >= 140  # every slow client was closed by the deadline or the cap
        assert _metric(sc, "llmtap_client_connections_dropped_total", reason="header_timeout") >= 50
        assert _metric(sc, "llmtap_client_connections") < 20
        assert sc.log.read_text().count("client connections dropped") <= 3  # rate-limited
    finally:
        for s in socks:
            s.close()
        stop(sc.proc)


def _connect(sc: Sidecar, creds: str) -> int:
    import base64

    s = socket.create_connection(("127.0.0.1", sc.listen), timeout=10)
    try:
        auth = base64.b64encode(creds.encode()).decode()
        head = "CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n"
        s.sendall(f"{head}Proxy-Authorization: Basic {auth}\r\n\r\n".encode())
        return int(s.recv(4096).split(b" ", 2)[1])
    finally:
        s.close()


@pytest.mark.parametrize("auth", ["any", "alice:", ":secret", ""])
def test_a_network_listener_needs_real_credentials(tmp_path: Path, auth: str) -> None:
    """Finding 11: ``--listen 0.0.0.0:... --proxy-auth any`` was allowed: an open proxy in effect."""
    import subprocess

    from helpers import LLMTAP, free_port

    args = [*LLMTAP, "run", "--data-dir", str(tmp_path / "d"), "--listen", f"0.0.0.0:{free_port()}",
            "--admin", f"127.0.0.1:{free_port()}"]  # fmt: skip
    if auth:
        args += ["--proxy-auth", auth]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "real credentials" in r.stderr, r.stderr


def test_credentials_from_a_file_or_htpasswd_and_guessing_is_budgeted(mock: Mock, tmp_path: Path) -> None:
    """Finding 17: proxy auth accepted ~500 guesses/s with no backoff; secrets had to be on the command line."""
    import bcrypt

    secret = tmp_path / "proxy-auth"
    secret.write_text("alice:r1ght-pass\n")
    sc = start_sidecar(tmp_path / "data", mock, "--proxy-auth-file", str(secret))
    try:
        assert _connect(sc, "alice:r1ght-pass") == 200
        assert PLANTED not in sc.log.read_text() and PLANTED not in " ".join(map(str, sc.proc.args))
        for i in range(40):
            assert _connect(sc, f"alice:guess{i}") == 407
        assert _connect(sc, "alice:r1ght-pass") == 407  # the budget is spent: not even checked
        time.sleep(2.5)
        assert _connect(sc, "alice:r1ght-pass") == 200  # it refills
    finally:
        stop(sc.proc)
    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text("bob:" + bcrypt.hashpw(b"hunter22", bcrypt.gensalt(rounds=4)).decode() + "\n")
    sc = start_sidecar(tmp_path / "data2", mock, "--proxy-auth", f"@{htpasswd}")
    try:
        assert _connect(sc, "bob:hunter22") == 200 and _connect(sc, "bob:wrong") == 407
    finally:
        stop(sc.proc)


PLANTED = "r1ght-pass"
