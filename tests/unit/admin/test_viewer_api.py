"""The viewer's endpoints: a store that does not answer is reported fast and as such (503 store_unreachable),
bad requests are 400s with a reason, unknown ids 404s."""

from __future__ import annotations

import threading
import time

import pytest

from llmtap.admin import viewer_api
from llmtap.admin.viewer_api import StoreProbe, handle, unreachable


def refused(sql: str, fmt: str, params: dict[str, str]) -> bytes:
    raise ConnectionRefusedError("[Errno 111] Connection refused")


def test_a_hung_store_is_reported_within_the_probe_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(viewer_api, "PROBE_TIMEOUT_S", 0.3)
    release = threading.Event()

    def hung(sql: str, fmt: str, params: dict[str, str]) -> bytes:
        release.wait(5)
        return b"1\n"

    probe = StoreProbe(hung)
    t = time.monotonic()
    st = probe.status()
    assert time.monotonic() - t < 4.5  # not the hung read's 5 s: the probe's own timeout (0.3 s) answered
    assert st["ok"] is False and "not answered" in st["error"]
    release.set()
    time.sleep(0.1)
    monkeypatch.setattr(viewer_api, "PROBE_TTL_S", 0.0)
    assert probe.status()["ok"] is True


def test_probe_names_a_refused_store() -> None:
    st = StoreProbe(refused).status()
    assert st == {"ok": False, "error": "[Errno 111] Connection refused"}
    assert StoreProbe(lambda s, f, p: b"1\n").status() == {"ok": True}


@pytest.mark.parametrize(
    ("error", "down"),
    [
        (ConnectionRefusedError("refused"), True),
        (TimeoutError("read timed out"), True),
        (RuntimeError("HTTPConnectionPool(host='ch', port=8123): Max retries exceeded with url"), True),
        (RuntimeError("Code: 60. DB::Exception: Unknown table expression identifier 'llm_calls'"), False),
        (ValueError("syntax error"), False),
    ],
)
def test_unreachable_or_not(error: Exception, down: bool) -> None:
    assert unreachable(error) is down


def test_handle_statuses() -> None:
    code, body = handle("/api/explain-cost", refused, {"window": "24h", "baseline": "7d"})
    assert code == 503 and body["store_unreachable"] is True
    code, body = handle("/api/explain-cost", refused, {"window": "forever"})
    assert code == 400 and "--window" in body["error"]
    code, body = handle("/api/explain-cost", refused, {"by": ["colour"]})
    assert code == 400 and "by takes" in body["error"]
    code, body = handle("/api/explain-latency", refused, {"metric": "speed"})
    assert code == 400
    code, body = handle("/api/call", lambda s, f, p: b"", {"trace_id": "abc"})
    assert code == 404 and "no call" in body["error"]
    code, body = handle("/api/call", refused, {"trace_id": "x'; DROP"})
    assert code == 400
    code, body = handle("/api/session", refused, ["not", "an", "object"])
    assert code == 400


@pytest.mark.parametrize("end", ["nan", "inf", "-1", True, ["1"], {"a": 1}, "yesterday", "1e20"])
def test_a_bad_end_is_a_400_before_any_query(end: object) -> None:
    def never(sql: str, fmt: str, params: dict[str, str]) -> bytes:
        raise AssertionError("no query for a bad request")

    for path in ("/api/explain-cost", "/api/explain-latency"):
        code, body = handle(path, never, {"window": "24h", "baseline": "7d", "end": end})
        assert code == 400 and "end" in body["error"], body


def test_an_end_fixes_the_window() -> None:
    seen: list[str] = []

    def q(sql: str, fmt: str, params: dict[str, str]) -> bytes:
        seen.append(sql)
        return b""

    code, body = handle("/api/explain-cost", q, {"window": "24h", "baseline": "7d", "end": 1764590400})
    assert code == 200 and body["window"]["to"] == "2025-12-01T12:00:00Z"
    assert "toDateTime64(1764590400" in seen[0]
