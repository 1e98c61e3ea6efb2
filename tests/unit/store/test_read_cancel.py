"""Issue #26: an abandoned admin query that was still waiting — for a read session, or for a worker of the admin
server — ran its full 30 s later (six of them kept the engine busy for a minute). A cancelled query never starts.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from llmtap.admin.httpd import HttpServer, Request, Response, Route
from llmtap.store.clickhouse import ClickHouseBackend
from llmtap.store.embedded import ChdbBackend
from llmtap.store.readonly import QueryLimits

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop

LONG = "SELECT count() FROM numbers(100000000000) WHERE sipHash64(number) = 1"


def _running(store: ChdbBackend, tag: str) -> bool:
    out = store.query(
        f"SELECT count() FROM system.processes WHERE startsWith(query, '/* llmtap-admin:{tag} */')", "TSV"
    )  # (a LIKE would find this query itself)
    return int(out.strip() or 0) > 0


def _until(cond: object, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def bounded(inproc_store: ChdbBackend) -> Iterator[ChdbBackend]:
    b = ChdbBackend(inproc_store.path, limits=QueryLimits(max_execution_time=120))
    yield b
    b.close()


def test_a_read_waiting_for_a_session_never_runs_once_cancelled(bounded: ChdbBackend) -> None:
    """Both read sessions busy, a third read waits: cancelling it drops it at once — while the two still run — and
    it does not run when a session frees up."""
    errors: dict[str, str] = {}

    def read(tag: str) -> None:
        try:
            bounded.read(LONG, "TSV", tag=tag)
        except Exception as e:
            errors[tag] = str(e)

    busy = [threading.Thread(target=read, args=(t,), daemon=True) for t in ("busyone", "busytwo")]
    for th in busy:
        th.start()
    try:
        assert _until(lambda: _running(bounded, "busyone") and _running(bounded, "busytwo"))
        waiting = threading.Thread(target=read, args=("waiting",), daemon=True)
        waiting.start()
        time.sleep(0.3)
        assert waiting.is_alive() and not _running(bounded, "waiting")  # it waits for a session
        bounded.cancel("waiting")
        waiting.join(30)
        assert not waiting.is_alive() and "cancel" in errors["waiting"].lower()
        assert all(th.is_alive() for th in busy)  # dropped while both sessions were still busy
    finally:
        bounded.cancel("busyone")
        bounded.cancel("busytwo")
        for th in busy:
            th.join(30)
    assert not _running(bounded, "waiting")
    assert bounded.read("SELECT 7", "TSV").strip() == b"7"  # the sessions came back


def test_a_session_whose_query_was_cancelled_is_not_reused(bounded: ChdbBackend) -> None:
    """chDB keeps what a cancelled query had written and returns it as the start of the next result on that
    session: a read after a cancel got two JSON documents (the viewer's panels and variables answered 400, and
    the guard's parser, which read from the same sessions, refused valid queries)."""
    import json

    done = threading.Event()

    def long() -> None:
        try:
            bounded.read(LONG, "JSONCompact", tag="tocancel")
        except Exception:
            done.set()

    th = threading.Thread(target=long, daemon=True)
    th.start()
    assert _until(lambda: _running(bounded, "tocancel"))
    bounded.cancel("tocancel")
    th.join(30)
    assert done.is_set()
    for _ in range(6):  # every session the next reads get
        assert json.loads(bounded.read("SELECT 1 AS one", "JSONCompact"))["data"] == [[1]]


def test_a_read_cancelled_before_it_started_is_not_sent_to_the_server() -> None:
    """On a ClickHouse server store: a tag cancelled while its query was still being checked is never sent (the
    server's ``KILL QUERY`` would have found nothing to kill)."""
    b = ClickHouseBackend("clickhouse://u:p@127.0.0.1:9/llmtap", connect_timeout=0.5, writer=False)
    try:
        try:
            b.cancel("early")
        except Exception:
            pass  # nothing answers on port 9: the kill itself cannot be sent
        with pytest.raises(Exception, match=r"(?i)cancel"):
            b.read("SELECT 1", "TSV", tag="early")
    finally:
        b.close()


def test_a_request_still_queued_for_a_worker_never_runs_when_its_client_leaves() -> None:
    """Every query worker busy, one more request queued: its client leaves, the workers free up, it never runs."""
    release = threading.Event()
    ran: list[str] = []

    def handler(req: Request) -> Response:
        if req.path == "/block":
            release.wait(30)
        ran.append(req.path)
        return Response(200, b"ok")

    srv = HttpServer("127.0.0.1", 0, lambda m, p: Route(1024, heavy=True), handler)
    srv.start()
    socks = []
    try:
        host, port = srv.address
        for path in ["/block"] * 4 + ["/victim"]:
            s = socket.create_connection((host, port), timeout=10)
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".encode())
            socks.append(s)
        assert _until(lambda: len(srv._inflight) == 5)
        socks.pop().close()  # the victim's client goes away while every worker is busy
        _until(lambda: len(srv._inflight) == 4, 5)  # (an earlier server waited 10 s, then ran it if it could)
        release.set()
        assert _until(lambda: ran.count("/block") == 4)
        time.sleep(0.5)
        assert "/victim" not in ran
    finally:
        release.set()
        for s in socks:
            s.close()
        srv.close()


def test_a_handler_that_sets_its_cancel_after_the_client_left_is_cancelled_at_once() -> None:
    req = Request("POST", "/api/sql", {})
    req.client_gone()
    called: list[int] = []
    req.set_cancel(lambda: called.append(1))
    assert called == [1]
