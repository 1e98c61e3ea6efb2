"""The admin API probed as an attacker would, against a running sidecar (issue #19, findings 0-4, 9, 15-17).

Each test names the finding it reproduces. The helpers here speak the admin API the way any
client can (JSON, the install's token when there is one), so the same file runs against an
earlier llmtap, where these tests fail.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import LLMTAP, Mock, Sidecar, openai_client, session_id, start_sidecar, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PLANTED_ENV = "sk-proj-PlantedEnvSecret0123456789abcdefABCDEF"
# 10^10 hashes over one stored row, in bounded memory (the engine refuses a 10^12-row ARRAY JOIN chunk outright)
LONG_QUERY = (
    "SELECT count() FROM (SELECT arrayJoin(range(100000)) AS a FROM llm_calls LIMIT 100000) AS x "
    "CROSS JOIN (SELECT arrayJoin(range(100000)) AS b FROM llm_calls LIMIT 100000) AS y WHERE sipHash64(a, b) = 1"
)
PLANTED_ARGV = "PlantedArgvPass9876"


def token_of(sc: Sidecar) -> str:
    try:
        return (sc.data_dir / "admin-token").read_text().strip()
    except FileNotFoundError:
        return ""  # an llmtap without per-install tokens


def auth(sc: Sidecar) -> dict[str, str]:
    t = token_of(sc)
    return {"Authorization": f"Bearer {t}"} if t else {}


def post(sc: Sidecar, path: str, payload: Any, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    h = {"Content-Type": "application/json", **auth(sc), **(headers or {})}
    return sc.admin_request("POST", path, json.dumps(payload).encode(), h)


def sql(sc: Sidecar, query: str) -> tuple[int, bytes]:
    return post(sc, "/api/sql", {"query": query, "format": "TSV"})


@pytest.fixture(scope="module")
def target(mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    """A sidecar holding secrets where finding 1 found them: its environment and its command line."""
    data = tmp_path_factory.mktemp("target") / "data"
    sc = start_sidecar(data, mock, "--proxy-auth", f"alice:{PLANTED_ARGV}", env={"OPENAI_API_KEY": PLANTED_ENV})
    yield sc
    stop(sc.proc)


def secrets_of(sc: Sidecar) -> list[bytes]:
    """What no query may return: the CA private key, the install secret, the planted env and argv secrets."""
    ca_key = (sc.data_dir / "ca" / "mitmproxy-ca.pem").read_text()
    key_line = next(line for line in ca_key.splitlines() if line and "-----" not in line)
    install = (sc.data_dir / "install-secret").read_bytes()[:16]
    return [key_line.encode(), install, PLANTED_ENV.encode(), PLANTED_ARGV.encode()]


def reading_attempts(sc: Sidecar) -> list[str]:
    d = sc.data_dir
    return [
        f"SELECT * FROM `file`('{d}/ca/mitmproxy-ca.pem', 'LineAsString')",
        f"SELECT * FROM filesystem('{d}')",
        f"SELECT file('{d}/install-secret')",
        "SELECT * FROM `file`('/proc/self/environ', 'RawBLOB')",
        "SELECT * FROM `file`('/proc/self/cmdline', 'RawBLOB')",
        f"SELECT $$'$$ UNION ALL SELECT * FROM file('{d}/ca/mitmproxy-ca.pem', 'LineAsString') --'",
        "SELECT * FROM oss('/proc/self/environ', 'RawBLOB')",
        f"SELECT * FROM eval('{d}')",
    ]


def test_no_query_writes_a_file(target: Sidecar, tmp_path: Path) -> None:
    """Finding 0: comment and quoting tricks got INTO OUTFILE / INSERT INTO FUNCTION file() past the guard
    (a .pth file written this way runs code at the next Python start)."""
    probe = tmp_path / "probe"
    probe.mkdir()
    attempts = [
        f"SELECT $$'$$ INTO OUTFILE '{probe}/out.txt' --'",
        f"SELECT $$'$$; INSERT INTO FUNCTION file('{probe}/evil.pth', 'LineAsString', 'l String') "
        "SELECT 'import os' --'",
        f"INSERT INTO FUNCTION file('{probe}/x.csv', 'CSV', 'a Int8') SELECT 1",
        f"SELECT 1 INTO OUTFILE '{probe}/y.txt'",
    ]
    for q in attempts:
        status, _ = sql(target, q)
        assert status != 200, q
        r = subprocess.run(
            [*LLMTAP, "sql", q, "--admin", f"127.0.0.1:{target.admin}", "--data-dir", str(target.data_dir)],
            capture_output=True,
            timeout=60,
        )
        assert r.returncode != 0
    assert sorted(p.name for p in probe.iterdir()) == []


def test_no_query_reads_the_ca_key_secrets_environment_or_command_line(target: Sidecar) -> None:
    """Finding 1: table functions and tricks the deny-list missed read the CA key, the install secret,
    /proc/self/environ and /proc/self/cmdline, and listed the data dir."""
    secrets = secrets_of(target)
    for q in reading_attempts(target):
        status, body = sql(target, q)
        assert status != 200, (q, body[:200])
        assert not any(s in body for s in secrets), q


def test_no_query_reaches_the_network(target: Sidecar) -> None:
    """Finding 1: url()/oss()/remote() made the query itself reach the network (SSRF, exfiltration)."""
    hits: list[bytes] = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    stop_flag = threading.Event()

    def accept() -> None:
        while not stop_flag.is_set():
            try:
                conn, _ = srv.accept()
                hits.append(conn.recv(1024))
                conn.close()
            except OSError:
                pass

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        for q in (
            f"SELECT * FROM url('http://127.0.0.1:{port}/x', 'RawBLOB')",
            f"SELECT * FROM `url`('http://127.0.0.1:{port}/x', 'RawBLOB')",
            f"SELECT * FROM oss('http://127.0.0.1:{port}/b/x', 'RawBLOB')",
            f"SELECT * FROM s3('http://127.0.0.1:{port}/b/x', 'RawBLOB')",
            f"SELECT * FROM remote('127.0.0.1:{port}', system.one)",
            f"SELECT * FROM urlCluster('default', 'http://127.0.0.1:{port}/x', 'RawBLOB')",
        ):
            sql(target, q)
        time.sleep(0.5)
    finally:
        stop_flag.set()
        th.join()
        srv.close()
    assert hits == []


def test_web_pages_and_rebinding_hosts_are_refused(target: Sidecar) -> None:
    """Finding 4: a page on another origin could POST text/plain (no preflight); any Host was accepted
    (DNS rebinding could read the answers); there was no token by default."""
    query = json.dumps({"query": "SELECT count() FROM llm_calls"}).encode()
    simple = {"Content-Type": "text/plain"}  # what a form or fetch(no-cors) can send cross-site
    assert target.admin_request("POST", "/api/sql", b"SELECT 1", simple)[0] in (401, 403, 415)
    assert target.admin_request("POST", "/api/sql", b"SELECT 1", {**simple, **auth(target)})[0] == 415
    as_json = {"Content-Type": "application/json"}
    assert target.admin_request("POST", "/api/sql", query, as_json)[0] == 401  # no token: no data
    cross = {"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}
    assert post(target, "/api/sql", {"query": "SELECT 1"}, cross)[0] == 403
    assert post(target, "/api/sql", {"query": "SELECT 1"}, {"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert post(target, "/api/panel", {"uid": "llmtap-overview", "panel": 1}, {"Origin": "http://evil.test"})[0] == 403
    rebound = {"Host": f"evil.test:{target.admin}"}
    for path in ("/", "/api/dashboards", "/metrics"):
        assert target.admin_request("GET", path, headers=rebound)[0] == 421, path
    status, _ = target.admin_request("POST", "/api/panel", json.dumps({"uid": "llmtap-calls", "panel": 1}).encode(),
                                     {**as_json, **rebound})  # fmt: skip
    assert status in (401, 421)
    assert target.admin_request("GET", "/healthz", headers=rebound)[0] == 200  # probes name it any way they like
    conn = http.client.HTTPConnection("127.0.0.1", target.admin, timeout=10)
    conn.request("OPTIONS", "/api/sql", headers={"Origin": "http://evil.test", "Access-Control-Request-Method": "POST"})
    resp = conn.getresponse()
    assert resp.status != 200 and not any(k.lower().startswith("access-control-") for k, _ in resp.getheaders())
    conn.close()


def test_the_install_token_is_private_and_used_transparently(target: Sidecar) -> None:
    path = target.data_dir / "admin-token"
    assert path.exists() and (path.stat().st_mode & 0o777) == 0o600
    r = subprocess.run(
        [*LLMTAP, "sql", "SELECT 41 + 1", "--admin", f"127.0.0.1:{target.admin}", "--data-dir", str(target.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("42"), r.stderr


def test_a_viewer_link_with_an_injected_variable_runs_no_sql(target: Sidecar) -> None:
    """Finding 2: ``/#llmtap-trace?trace_id=<injection>``: dashboard variables went unquoted into the SQL."""
    ca = f"{target.data_dir}/ca/mitmproxy-ca.pem"
    injections = [
        f"' UNION ALL SELECT line, '', '', '', '', 0, 0, [], [], 0 FROM file('{ca}', 'LineAsString') --",
        f"x' OR 1=1 UNION ALL SELECT file('{ca}'), '', '', '', '', 0, 0, [], [], 0 --",
        "\\' OR 1=1 --",
    ]
    secrets = secrets_of(target)
    for value in injections:
        status, body = post(target, "/api/panel", {"uid": "llmtap-trace", "panel": 1, "vars": {"trace_id": [value]}})
        assert not any(s in body for s in secrets), value
        if status == 200:
            assert json.loads(body)["rows"] == []  # the value was compared as a value: no span has that id
    for var in ("service", "provider", "model", "feature"):
        value = f"x') UNION ALL SELECT file('{ca}') --"
        status, body = post(target, "/api/variable", {"uid": "llmtap-calls", "name": var, "vars": {var: [value]}})
        assert not any(s in body for s in secrets)
        status, body = post(target, "/api/panel", {"uid": "llmtap-calls", "panel": 1, "vars": {var: [value]}})
        assert not any(s in body for s in secrets)


def test_macro_expansion_is_linear(target: Sidecar) -> None:
    """Finding 15: a 350-byte request took 90 s of CPU and 1.6 GB (nested macros in a variable value)."""
    bomb = "$__timeFilter(" * 20 + "x" + ")" * 20
    t = time.monotonic()
    status, body = post(target, "/api/panel", {"uid": "llmtap-calls", "panel": 1, "vars": {"feature": [bomb]}})
    assert time.monotonic() - t < 10
    assert status in (200, 400, 401)
    assert len(body) < 1 << 20


def test_content_length_tricks_are_refused(target: Sidecar) -> None:
    """Finding 16: ``Content-Length: -1`` bypassed the 1 MiB cap (400 MiB → 3.2 GB)."""
    for length in ("-1", "+5", "1e9", "0x10", "5, 5", str(400 << 20)):
        s = socket.create_connection(("127.0.0.1", target.admin), timeout=10)
        s.sendall(
            f"POST /api/sql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n".encode()
        )
        s.sendall(b"x" * 65536)
        status = s.recv(200).split(b" ", 2)[1]
        s.close()
        assert status in (b"400", b"413"), length


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def test_slow_clients_cost_no_thread_and_health_answers(target: Sidecar) -> None:
    """Finding 6: the admin server spawned a thread per connection (2,000 slowloris connections → 2,000
    threads, and proxy calls failing afterwards)."""
    before = _threads(target.proc.pid)
    socks = []
    try:
        for _ in range(2000):
            s = socket.create_connection(("127.0.0.1", target.admin), timeout=10)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # never finished
            socks.append(s)
        time.sleep(1)
        assert _threads(target.proc.pid) < before + 20
        t = time.monotonic()
        status, _ = target.admin_request("GET", "/healthz")
        assert status == 200 and time.monotonic() - t < 5
    finally:
        for s in socks:
            s.close()


def test_an_abandoned_long_query_is_cancelled_and_starves_nothing(target: Sidecar) -> None:
    """Finding 9: a client that abandoned a long query left it running (~120% CPU), records queued behind the
    store lock, every other admin query hung, and SIGTERM no longer stopped the process."""
    sid = session_id()
    _call(target, sid)  # at least one row for the ARRAY JOINs to multiply
    s = socket.create_connection(("127.0.0.1", target.admin), timeout=10)
    body = json.dumps({"query": LONG_QUERY}).encode()
    head = (f"POST /api/sql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n")  # fmt: skip
    for k, v in auth(target).items():
        head += f"{k}: {v}\r\n"
    s.sendall((head + "\r\n").encode() + body)
    time.sleep(1.5)
    s.close()  # the client goes away
    t = time.monotonic()
    status, out = sql(target, "SELECT 7")
    assert status == 200 and out.strip() == b"7" and time.monotonic() - t < 5
    sid2 = session_id()
    t = time.monotonic()
    _call(target, sid2)
    while time.monotonic() - t < 10 and not _count(target, sid2):
        time.sleep(0.2)
    assert _count(target, sid2) == 1  # records kept flowing into the store
    time.sleep(1)
    cpu0 = _cpu_s(target.proc.pid)
    time.sleep(2)
    assert _cpu_s(target.proc.pid) - cpu0 < 1.0  # the abandoned query is not running any more


def _send_query(sc: Sidecar, query: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", sc.admin), timeout=10)
    body = json.dumps({"query": query}).encode()
    head = (f"POST /api/sql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n")  # fmt: skip
    for k, v in auth(sc).items():
        head += f"{k}: {v}\r\n"
    s.sendall((head + "\r\n").encode() + body)
    return s


def test_abandoned_queries_still_waiting_for_a_session_never_run(target: Sidecar) -> None:
    """#26: an abandoned admin query still waiting for a read session (or for a query worker) ran its full 30 s
    later; six of them kept the engine busy for a minute. The engine's CPU after all six clients left is compared
    with its CPU while they ran (the same machine, the same minute)."""
    sid = session_id()
    _call(target, sid)
    _stored(target, sid)  # at least one row for the ARRAY JOINs to multiply
    socks = [_send_query(target, LONG_QUERY) for _ in range(6)]
    try:
        time.sleep(1.5)  # two run (one per read session), the others wait for a session or a worker
        cpu0 = _cpu_s(target.proc.pid)
        time.sleep(2)
        busy = _cpu_s(target.proc.pid) - cpu0
    finally:
        for s in socks:
            s.close()  # every client goes away
    time.sleep(1.5)
    cpu1 = _cpu_s(target.proc.pid)
    time.sleep(3)
    after = (_cpu_s(target.proc.pid) - cpu1) / 3
    assert busy > 0.2, busy  # the baseline: the queries did run (on a busy machine, slower)
    assert after < busy / 2 / 4 + 0.03, (busy, after)  # nothing of the six runs any more (an idle sidecar's own)
    t = time.monotonic()
    status, out = sql(target, "SELECT 7")
    assert status == 200 and out.strip() == b"7" and time.monotonic() - t < 10


def _call(sc: Sidecar, sid: str) -> None:
    import ssl

    import openai

    proxy = f"http://alice:{PLANTED_ARGV}@127.0.0.1:{sc.listen}"
    http = openai.DefaultHttpxClient(proxy=proxy, verify=ssl.create_default_context(cafile=str(sc.bundle)))
    c = openai.OpenAI(api_key="sk-test", max_retries=0, http_client=http)
    c.embeddings.create(model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-session": sid})


def _count(sc: Sidecar, sid: str) -> int:
    status, out = sql(sc, f"SELECT count() FROM llm_calls WHERE session_id = '{sid}'")
    return int(out.strip() or 0) if status == 200 else 0


def _cpu_s(pid: int) -> float:
    """CPU seconds of the sidecar and every process under it (its proxy workers, the embedded store's engine
    process, where the queries run)."""
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, cpu s)
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        stats[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    tree, todo = {pid}, [pid]
    while todo:
        parent = todo.pop()
        kids = [p for p, (pp, _) in stats.items() if pp == parent and p not in tree]
        tree.update(kids)
        todo.extend(kids)
    return sum(stats[p][1] for p in tree if p in stats)


def test_sigterm_stops_the_sidecar_while_a_long_query_runs(mock: Mock, tmp_path: Path) -> None:
    """Finding 9: with a long admin query running, SIGTERM no longer stopped the process (killed after 45 s)."""
    import signal

    sc = start_sidecar(tmp_path / "data", mock)
    _call_plain(sc)
    seen: list[object] = []

    def read() -> None:
        try:
            seen.append(sql(sc, LONG_QUERY)[0])
        except OSError as e:  # the connection closed under the reader, as the process ended
            seen.append(e)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    time.sleep(1.5)
    t0 = time.monotonic()
    sc.proc.send_signal(signal.SIGTERM)
    try:
        code = sc.proc.wait(30)
    finally:
        stop(sc.proc)
    assert code == 0 and time.monotonic() - t0 < 20
    t.join(10)
    assert not t.is_alive() and len(seen) == 1, seen  # the reader was answered or disconnected, never left hanging


def _call_plain(sc: Sidecar) -> None:
    import ssl

    import openai

    http = openai.DefaultHttpxClient(proxy=sc.proxy_url, verify=ssl.create_default_context(cafile=str(sc.bundle)))
    c = openai.OpenAI(api_key="sk-test", max_retries=0, http_client=http)
    sid = session_id()
    c.embeddings.create(model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-session": sid})
    sc.row(sid)


def _stored(sc: Sidecar, sid: str) -> None:
    deadline = time.monotonic() + 10
    while not _count(sc, sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _count(sc, sid) == 1


def _login_cookie(sc: Sidecar) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", sc.admin, timeout=10)
    conn.request("POST", "/api/login", json.dumps({"token": token_of(sc)}), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    cookie = resp.getheader("Set-Cookie") or ""
    conn.close()
    assert resp.status == 204
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    return cookie.split(";", 1)[0]


def test_the_viewer_pages_endpoints_need_the_token_and_refuse_other_origins(target: Sidecar) -> None:
    """The viewer's newer endpoints (explain, call, session) return stored data: the same rules as /api/sql —
    a token (bearer or the login's cookie), JSON only, no other Host without the bearer, no other Origin."""
    sid = session_id()
    _call(target, sid)
    _stored(target, sid)
    q = {"query": f"SELECT trace_id FROM llm_calls WHERE session_id = '{sid}'", "format": "JSONEachRow"}
    trace = json.loads(post(target, "/api/sql", q)[1])
    bodies = {
        "/api/explain-cost": {"window": "24h", "baseline": "7d", "by": ["model"]},
        "/api/explain-latency": {"window": "24h", "baseline": "7d"},
        "/api/call": {"trace_id": trace["trace_id"]},
        "/api/session": {"session_id": sid},
    }
    cookie = _login_cookie(target)
    as_json = {"Content-Type": "application/json"}
    for path, payload in bodies.items():
        body = json.dumps(payload).encode()
        assert target.admin_request("POST", path, body, as_json)[0] == 401, path  # no token: no data
        status, out = target.admin_request("POST", path, body, {**as_json, **auth(target)})
        assert status == 200, (path, out[:300])
        assert target.admin_request("POST", path, body, {**as_json, "Cookie": cookie})[0] == 200, path
        wrong = {**as_json, "Cookie": "llmtap_admin=" + "0" * 64}
        assert target.admin_request("POST", path, body, wrong)[0] == 401, path
        assert target.admin_request("POST", path, body, {"Content-Type": "text/plain", "Cookie": cookie})[0] == 415
        for cross in (
            {"Origin": "http://evil.test"},
            {"Origin": "http://127.0.0.1:1"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},
        ):
            assert target.admin_request("POST", path, body, {**as_json, "Cookie": cookie, **cross})[0] == 403, cross
        rebound = {**as_json, "Cookie": cookie, "Host": f"evil.test:{target.admin}"}
        assert target.admin_request("POST", path, body, rebound)[0] == 421, path
    assert json.loads(post(target, "/api/call", bodies["/api/call"])[1])["call"]["session_id"] == sid
    # the store's status answers without the token, like /healthz, and says nothing from the store
    status, out = target.admin_request("GET", "/api/status")
    assert status == 200 and json.loads(out) == {"store": {"ok": True}}
    assert target.admin_request("GET", "/api/status", headers={"Host": "evil.test"})[0] == 421
    assert target.admin_request("GET", "/api/status", headers={"Origin": "http://evil.test"})[0] == 403


def test_the_pages_ids_are_bound_parameters(target: Sidecar) -> None:
    """Ids reach SQL only as bound parameters: a session whose id is SQL is found as itself, and injections
    through the ids, the explain choices and their periods read nothing."""
    odd = f"x' OR '1'='1' -- {session_id()}"
    _call(target, odd)
    _stored(target, odd.replace("'", "\\'"))
    status, out = post(target, "/api/session", {"session_id": odd})
    assert status == 200, out
    page = json.loads(out)
    assert page["session_id"] == odd and page["summary"]["calls"] == 1  # that session, not every call
    ca = f"{target.data_dir}/ca/mitmproxy-ca.pem"
    secrets = secrets_of(target)
    attempts = [
        ("/api/call", {"trace_id": f"' UNION ALL SELECT * FROM file('{ca}', 'LineAsString') --"}),
        ("/api/call", {"trace_id": ["x"]}),
        ("/api/session", {"session_id": f"' UNION ALL SELECT line FROM file('{ca}', 'LineAsString') --"}),
        ("/api/session", {"session_id": {"a": 1}}),
        ("/api/explain-cost", {"by": [f"model) UNION ALL SELECT file('{ca}') --"]}),
        ("/api/explain-cost", {"window": f"1h') UNION ALL SELECT file('{ca}') --"}),
        ("/api/explain-latency", {"metric": f"duration' UNION ALL SELECT file('{ca}') --"}),
        ("/api/explain-latency", {"baseline": f"7d' UNION ALL SELECT file('{ca}') --"}),
    ]
    for path, payload in attempts:
        status, out = post(target, path, payload)
        assert status in (400, 404), (path, payload, status, out[:300])
        assert not any(s in out for s in secrets), (path, payload)


def test_the_viewer_modules_are_served_from_static_js_only(target: Sidecar) -> None:
    """``/js/*`` serves the viewer's ES modules (script-src 'self' under the CSP) and nothing outside them."""
    conn = http.client.HTTPConnection("127.0.0.1", target.admin, timeout=10)
    conn.request("GET", "/js/main.js")
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 200 and resp.getheader("Content-Type", "").startswith("text/javascript")
    assert b"import" in body and resp.getheader("X-Content-Type-Options") == "nosniff"
    assert "script-src 'self'" in resp.getheader("Content-Security-Policy", "")
    assert target.admin_request("GET", "/js/pages/call.js")[0] == 200
    assert target.admin_request("GET", "/js/main.js", headers={"Host": "evil.test"})[0] == 421
    for path in (
        "/js/../server.py",
        "/js/../viewer.py",
        "/js/../../admin/auth.py",
        "/js/pages/../../sqlguard.py",
        "/js/../static/index.html",
        "/js/%2e%2e/server.py",
        "/js/..%2f..%2fadmin-token",
        "/js//etc/passwd",
        "/js/../../../../../../../../etc/passwd",
        f"/js/../../../../../../../..{target.data_dir}/admin-token",
        "/js/..\\server.py",
        "/js/main.js/../../server.py",
        "/js/",
        "/js/pages",
    ):
        status, out = target.admin_request("GET", path)
        assert status == 404, (path, status)
        assert token_of(target).encode() not in out and b"def " not in out and b"root:" not in out, path


def _login(sc: Sidecar, token: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", sc.admin, timeout=10)
    conn.request("POST", "/api/login", json.dumps({"token": token}), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    cookie = (resp.getheader("Set-Cookie") or "").split(";", 1)[0]
    resp.read()
    conn.close()
    return resp.status, cookie


def test_a_flood_of_wrong_logins_does_not_lock_out_the_right_token(target: Sidecar) -> None:
    """#26: a shared failed-login budget let any local process lock the browser login (every local process
    is 127.0.0.1, as the browser is)."""
    statuses = [_login(target, f"guess-{i}")[0] for i in range(40)]
    assert set(statuses) <= {401, 429} and statuses[-1] == 429
    status, cookie = _login(target, token_of(target))
    assert status == 204 and cookie.startswith("llmtap_admin=")


def test_logout_revokes_the_session(target: Sidecar) -> None:
    """#26: the session cookie was derived from the token: logging out could not revoke it."""
    status, cookie = _login(target, token_of(target))
    assert status == 204
    q = json.dumps({"query": "SELECT 1", "format": "TSV"}).encode()
    as_json = {"Content-Type": "application/json", "Cookie": cookie}
    assert target.admin_request("POST", "/api/sql", q, as_json)[0] == 200
    assert target.admin_request("POST", "/api/logout", b"{}", as_json)[0] == 204
    assert target.admin_request("POST", "/api/sql", q, as_json)[0] == 401  # that cookie, wherever it was copied


def test_an_existing_token_file_readable_by_others_is_made_private(mock: Mock, tmp_path: Path) -> None:
    """#26: an existing ``admin-token`` with mode 0644 stayed 0644."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "admin-token").write_text("a-token-someone-copied-in-with-0644-abcdefgh\n")
    (data / "admin-token").chmod(0o644)
    sc = start_sidecar(data, mock)
    try:
        assert (data / "admin-token").stat().st_mode & 0o777 == 0o600
        assert _login(sc, "a-token-someone-copied-in-with-0644-abcdefgh")[0] == 204  # the same token, kept
    finally:
        stop(sc.proc)


def test_healthz_names_no_internal_host_to_another_host_name(mock: Mock, tmp_path: Path) -> None:
    """#26: ``/healthz`` answers any Host (probes name the sidecar as they like) and named the internal
    ClickHouse host in ``store_error``: a page behind DNS rebinding read it. To such a Host it says its status."""
    sc = start_sidecar(tmp_path / "data", mock, "--store", "clickhouse://u:p@ch-internal.invalid:8123/llmtap")
    try:
        openai_client(sc).embeddings.create(model="text-embedding-3-small", input="x")  # the writer tries the store
        deadline = time.monotonic() + 60
        full: dict[str, Any] = {}
        while time.monotonic() < deadline and "ch-internal" not in full.get("store_error", ""):
            full = json.loads(sc.admin_request("GET", "/healthz")[1])
            time.sleep(0.3)
        assert "ch-internal" in full.get("store_error", ""), full  # the operator's own view names it
        status, body = sc.admin_request("GET", "/healthz", headers={"Host": f"evil.test:{sc.admin}"})
        assert status == 200 and json.loads(body) == {"status": "ok"}
    finally:
        stop(sc.proc)
