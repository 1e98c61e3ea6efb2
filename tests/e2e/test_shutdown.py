"""Cancels and restarts are not provider errors: HTTP/2 client cancels, and the graceful drain on SIGTERM/SIGINT.

Expected values come from the contract (DESIGN.md: ``outcome = cancelled`` when the client went
away; the issue: a call cut by the sidecar's own shutdown is ``cancelled`` / ``sidecar_shutdown``),
never from llmtap's output.
"""

from __future__ import annotations

import json
import signal
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import httpx2
import pytest
from helpers import LLMTAP, Mock, Sidecar, session_id, start_sidecar, stop

from llmtap.testing.rawclient import tls_socket

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
URL = "https://api.openai.com/v1/chat/completions"


def stream_body() -> dict[str, Any]:
    return {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def slow(events: int, delay_ms: int, session: str) -> dict[str, str]:
    return {
        "authorization": "Bearer sk-shutdown",
        "x-mock-delay-ms": str(delay_ms),
        "x-mock-events": str(events),
        "x-llmtap-session": session,
    }


def test_http2_client_that_stops_reading_and_closes_is_cancelled(sidecar: Sidecar) -> None:
    """httpx (the OpenAI SDK's transport) never sends RST_STREAM for a stream it stops reading: it closes
    the connection. Over HTTP/2 mitmproxy reports that as "peer closed connection", the same words as
    for an upstream that closes: the call is the client's cancel, not a mid-stream provider error."""
    sid = session_id()
    ctx = ssl.create_default_context(cafile=str(sidecar.bundle))
    with (
        httpx2.Client(http2=True, proxy=sidecar.proxy_url, verify=ctx, timeout=30) as c,
        c.stream("POST", URL, json=stream_body(), headers=slow(50, 200, sid)) as r,
    ):
        assert r.http_version == "HTTP/2"
        for n, _ in enumerate(r.iter_bytes(), 1):
            if n >= 2:
                break
    row = sidecar.row(sid, timeout=15)
    assert (row["outcome"], row["error_type"], row["mid_stream_error"]) == ("cancelled", "", False)
    assert row["finish_reason"] == "cancelled" and row["status_code"] == 200


def test_http2_rst_stream_cancel_is_cancelled_while_the_connection_stays_open(sidecar: Sidecar) -> None:
    """A client that resets the stream (RST_STREAM CANCEL: Go, Node, browsers) on a connection it keeps."""
    sid = session_id()
    tls = tls_socket("api.openai.com", 443, sidecar.bundle, ("127.0.0.1", sidecar.listen), alpn=("h2",))
    try:
        tls.do_handshake()
        assert tls.selected_alpn_protocol() == "h2"
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        stream = conn.get_next_available_stream_id()
        payload = json.dumps(stream_body()).encode()
        headers = [
            (":method", "POST"),
            (":path", "/v1/chat/completions"),
            (":authority", "api.openai.com"),
            (":scheme", "https"),
            ("content-type", "application/json"),
            ("content-length", str(len(payload))),
            *slow(50, 200, sid).items(),
        ]
        conn.send_headers(stream, headers)
        conn.send_data(stream, payload, end_stream=True)
        tls.sendall(conn.data_to_send())
        seen = 0
        while seen < 2:
            data = tls.recv(65536)
            assert data, "the proxy closed the connection"
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    seen += 1
            tls.sendall(conn.data_to_send())
        conn.reset_stream(stream, h2.errors.ErrorCodes.CANCEL)
        tls.sendall(conn.data_to_send())
        row = sidecar.row(sid, timeout=15)  # the connection is still open: the reset alone ended the call
        assert (row["outcome"], row["error_type"], row["mid_stream_error"]) == ("cancelled", "", False)
    finally:
        tls.close()


def _stream(sc: Sidecar, events: int, delay_ms: int, session: str, out: dict[str, Any]) -> None:
    ctx = ssl.create_default_context(cafile=str(sc.bundle))
    try:
        with (
            httpx2.Client(proxy=sc.proxy_url, verify=ctx, timeout=120) as c,
            c.stream("POST", URL, json=stream_body(), headers=slow(events, delay_ms, session)) as r,
        ):
            out["body"] = b"".join(r.iter_bytes())
    except Exception as e:
        out["error"] = e


def _offline_rows(sc: Sidecar) -> dict[str, dict[str, Any]]:
    q = "SELECT session_id, outcome, error_type, error_code, finish_reason, mid_stream_error FROM llm_calls"
    r = subprocess.run(
        [*LLMTAP, "sql", q, "--data-dir", str(sc.data_dir), "--format", "JSONEachRow"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return {d["session_id"]: d for d in map(json.loads, r.stdout.splitlines())}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_shutdown_drains_in_flight_streams_then_cuts_the_rest_as_sidecar_shutdown(
    mock: Mock, tmp_path: Path, sig: signal.Signals
) -> None:
    sc = start_sidecar(tmp_path / "data", mock, "--drain-timeout", "6s", "--workers", "3")  # each drains
    short, long_ = session_id(), session_id()
    results: dict[str, dict[str, Any]] = {short: {}, long_: {}}
    threads = [
        threading.Thread(target=_stream, args=(sc, 12, 250, short, results[short])),  # ~3 s: ends in the drain
        threading.Thread(target=_stream, args=(sc, 400, 250, long_, results[long_])),  # ~100 s: outlives it
    ]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status, body = sc.admin_request("GET", "/healthz")
            if json.loads(body)["inflight_calls"] == 2:
                break
            time.sleep(0.05)
        t0 = time.monotonic()
        sc.proc.send_signal(sig)
        time.sleep(0.5)
        # draining: no new connections, and the health check tells load balancers to stop sending
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", sc.listen), timeout=2).close()
        status, body = sc.admin_request("GET", "/healthz")
        assert status == 503 and json.loads(body)["status"] == "draining"
        code = sc.proc.wait(60)
        took = time.monotonic() - t0
    finally:
        for t in threads:
            t.join(30)
        stop(sc.proc)
    assert code == 0
    # it waited for the drain, and ended long before the ~100 s stream would have (no tighter bound on a busy machine)
    assert 5.5 < took < 60, f"the drain took {took:.1f}s with --drain-timeout 6s"
    assert results[short].get("body", b"").rstrip().endswith(b"data: [DONE]"), results[short]  # finished, whole
    assert "error" in results[long_]  # cut at the end of the drain
    rows = _offline_rows(sc)
    assert (rows[short]["outcome"], rows[short]["error_code"], rows[short]["finish_reason"]) == ("ok", "", "stop")
    cut = rows[long_]
    assert (cut["outcome"], cut["error_type"], cut["error_code"]) == ("cancelled", "", "sidecar_shutdown")
    assert cut["finish_reason"] == "cancelled" and cut["mid_stream_error"] in (0, False)
    log = sc.log.read_text()
    assert "Traceback" not in log and "CancelledError" not in log, log
    assert "1 calls still running were cut" in log
