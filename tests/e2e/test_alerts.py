"""`llmtap run --alert-webhook`: a real sidecar over seeded stores, real SDK traffic through it, a local webhook.

A seeded error burst that has held for the rule's pending period fires within two intervals; sending healthy
calls through the proxy brings the error rate back under the threshold and a resolved POST follows; quiet data
posts nothing; a webhook that is down is retried and never slows or breaks the traffic.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import LLMTAP, Mock, Sidecar, openai_client, start_sidecar, stop

from llmtap.alerts.notifier import TIMEOUT_S as POST_TIMEOUT_S

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
INTERVAL = 4.0


class Hook:
    """The webhook: records every POST with its arrival time."""

    def __init__(self, port: int = 0) -> None:
        self.posts: list[tuple[float, dict[str, Any]]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.posts.append((time.monotonic(), body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), H)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/slack"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def wait(self, status: str, timeout: float) -> tuple[float, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, body in self.posts:
                if body.get("status") == status:
                    return t, body
            time.sleep(0.05)
        raise AssertionError(f"no {status} POST within {timeout} s: {self.posts}")

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


def seed(data: Path, *args: str) -> None:
    r = subprocess.run([*LLMTAP, "seed", "--data-dir", str(data), *args], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr


def alerting(data: Path, mock: Mock, url: str) -> Sidecar:
    return start_sidecar(data, mock, "--alert-webhook", url, "--alert-interval", f"{INTERVAL:g}s")


def chat(sc: Sidecar, n: int, model: str = "gpt-4o-mini") -> list[float]:
    c = openai_client(sc)
    took = []
    for _ in range(n):
        t = time.monotonic()
        r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content
        took.append(time.monotonic() - t)
    return took


def test_error_burst_fires_then_resolves_once(mock: Mock, hook: Hook, tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed(data, "--calls", "0", "--scenario", "errors")
    sc = alerting(data, mock, hook.url)
    try:
        up = time.monotonic()
        t, body = hook.wait("firing", 2 * INTERVAL + 5)
        assert t - up <= 2 * INTERVAL + 2, f"fired {t - up:.1f} s after start"
        assert body["alert"] == "llmtap-error-rate"
        assert body["labels"] == {"provider": "openai", "model": "gpt-4o-mini"}
        assert body["value"] > 0.05 and body["text"].startswith("[FIRING] LLM error rate")
        assert [b["alert"] for _, b in hook.posts] == ["llmtap-error-rate"]  # nothing else on this data
        chat(sc, 100)  # healthy traffic: 6 errors in 140 calls is under 5%
        sent = time.monotonic()
        t, body = hook.wait("resolved", 2 * INTERVAL + 10)
        assert t - sent <= 2 * INTERVAL + 5
        assert body["alert"] == "llmtap-error-rate" and body["value"] < 0.05
        assert body["text"].startswith("[RESOLVED]")
        time.sleep(INTERVAL + 1)
        assert [b["status"] for _, b in hook.posts] == ["firing", "resolved"]  # once each
    finally:
        stop(sc.proc)
    state = json.loads((data / "alerts-state.json").read_text())
    assert state["instances"] == {} and state["outbox"] == []


def test_quiet_data_posts_nothing_and_state_survives_a_restart(mock: Mock, hook: Hook, tmp_path: Path) -> None:
    data = tmp_path / "quiet"
    seed(data, "--calls", "0", "--windows", "300", "--days", "7")
    sc = alerting(data, mock, hook.url)
    try:
        chat(sc, 5)
        time.sleep(3 * INTERVAL)
        assert hook.posts == []
        assert "alert" not in sc.log.read_text().lower() or "webhook POST failed" not in sc.log.read_text()
    finally:
        stop(sc.proc)
    # a firing alert is not announced again after a restart
    data = tmp_path / "restart"
    seed(data, "--calls", "0", "--scenario", "errors")
    sc = alerting(data, mock, hook.url)
    try:
        hook.wait("firing", 2 * INTERVAL + 5)
    finally:
        stop(sc.proc)
    sc = alerting(data, mock, hook.url)
    try:
        time.sleep(2 * INTERVAL + 1)
        assert [b["status"] for _, b in hook.posts] == ["firing"]
    finally:
        stop(sc.proc)


def test_a_webhook_that_is_down_never_touches_the_traffic(mock: Mock, tmp_path: Path) -> None:
    data = tmp_path / "down"
    seed(data, "--calls", "0", "--scenario", "errors")
    # The webhook is down the slow way: its port takes connections and never answers, so each POST waits its
    # whole timeout. Were the traffic to wait for the alerts, a call would take at least that long.
    silent = socket.create_server(("127.0.0.1", 0), backlog=64)
    port = silent.getsockname()[1]
    sc = alerting(data, mock, f"http://127.0.0.1:{port}/slack")
    hook = None
    try:  # traffic on another model, so that it does not dilute the error rate of the burst
        took = chat(sc, 30, "gpt-4o")
        deadline = time.monotonic() + 3 * INTERVAL + 4 * POST_TIMEOUT_S
        while "webhook POST failed" not in sc.log.read_text() and time.monotonic() < deadline:
            took += chat(sc, 5, "gpt-4o")
        assert "webhook POST failed" in sc.log.read_text()
        assert max(took) < POST_TIMEOUT_S, took  # the traffic does not wait for alerts
        silent.close()
        rows = sc.sql("SELECT count() AS n FROM llm_calls WHERE outcome = 'ok' AND request_model = 'gpt-4o'")
        assert int(rows[0]["n"]) == len(took)  # every live call recorded
        hook = Hook(port)  # the webhook comes back: the queued notification is delivered
        _, body = hook.wait("firing", 40)
        assert body["alert"] == "llmtap-error-rate"
        assert "Traceback" not in sc.log.read_text()
    finally:
        stop(sc.proc)
        silent.close()
        if hook is not None:
            hook.close()
