"""WebSocket APIs end to end: the official openai SDK's WebSocket clients → HTTPS_PROXY → a real
`llmtap run` → the mock's TLS WebSocket server.

Each socket carries a unique x-llmtap-session on its upgrade request; the rows of its calls are
found by it. Expected values come from the mock's scripts (usage, pacing) and the contract.
Every payload is compared byte for byte with what the mock logged on its side.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from helpers import Mock, Sidecar, session_id
from websockets.exceptions import ConnectionClosedError, InvalidStatus

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

PACE_MS = 40  # the mock's gap before every server event


def oai() -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test-ws-0123456789", max_retries=0)


def headers(sid: str, **extra: str) -> dict[str, str]:
    # x-llmtap-session is llmtap's (read, then stripped); x-mock-socket names the socket in the mock's log
    return {"x-llmtap-session": sid, "x-mock-socket": sid, "x-mock-delay-ms": str(PACE_MS), **extra}


def socket_log(mock: Mock, sid: str) -> dict[str, Any]:
    socks = [s for s in mock.sockets() if s["headers"].get("x-mock-socket") == sid]
    assert "x-llmtap-session" not in (socks[0]["headers"] if socks else {})  # stripped before upstream
    (sock,) = socks or [None]
    assert sock is not None, f"the mock saw no socket for {sid}"
    return sock


def until(conn: Any, *types: str) -> list[bytes]:
    out = []
    while True:
        raw = conn.recv_bytes()
        out.append(raw)
        if json.loads(raw)["type"] in types:
            return out


def create(model: str = "gpt-4.1", **fields: Any) -> str:
    return json.dumps(
        {"type": "response.create", "model": model, "input": "Say something naïve about café 日本語.", **fields}
    )


def test_responses_websocket_one_row_per_response(proxied: Sidecar, mock: Mock) -> None:
    sid = session_id()
    sent: list[str] = []
    got: list[bytes] = []
    with oai().responses.connect(extra_headers=headers(sid)) as conn:
        for msg in (
            create(max_output_tokens=300),
            create(metadata={"mock_scenario": "failed_rate_limit"}),
            create(metadata={"mock_scenario": "error"}),
        ):
            conn.send_raw(msg)
            sent.append(msg)
            got += until(conn, "response.completed", "response.failed", "error")
        conn.send({"type": "response.create", "model": "gpt-4.1", "input": "again"})  # the SDK's own serialisation
        got += until(conn, "response.completed")
    rows = proxied.rows(f"session_id = '{sid}'", 4)
    assert len(rows) == 4
    ok, failed, err, again = rows
    for r in rows:
        assert (r["api"], r["provider"], r["transport"], r["stream"]) == (
            "openai.responses",
            "openai",
            "websocket",
            True,
        )
        assert r["operation"] == "chat" and r["server_address"] == "api.openai.com" and r["status_code"] == 101
        assert r["connection_id"] == ok["connection_id"] != ""
        assert (r["client_name"], r["billing"]) == ("openai-python", "api")
        assert r["span_id"] and r["request_hash"]
    assert len({r["span_id"] for r in rows}) == 4
    # one answered call: the mock's usage, timings inside its pacing
    assert (ok["outcome"], ok["finish_reason"], ok["usage_source"]) == ("ok", "stop", "provider")
    assert (ok["input_tokens"], ok["output_tokens"], ok["cache_read_tokens"], ok["reasoning_tokens"]) == (
        12033,
        44,
        11904,
        12,
    )
    assert (ok["request_model"], ok["response_model"], ok["response_id"]) == (
        "gpt-4.1",
        "gpt-4.1-2025-04-14",
        "resp_mock456",
    )
    assert ok["max_output_tokens"] == 300 and ok["content_events"] == 6
    # ttfb: one pause before response.created; ttft: created, in_progress, output_item.added,
    # content_part.added, first delta
    # (lower bounds: the mock waited that long; no upper bound on a busy machine: the order of the marks instead)
    assert PACE_MS - 1 <= ok["ttfb_ms"] < ok["ttft_ms"]
    assert ok["ttft_ms"] >= 5 * PACE_MS - 1
    assert ok["ttft_ms"] + ok["decode_ms"] <= ok["duration_ms"] + 0.01
    assert ok["decode_ms"] >= 5 * PACE_MS - 1  # 6 deltas, 5 gaps: the first content token is not the last one
    assert ok["request_bytes"] == len(sent[0].encode()) and ok["response_bytes"] > 0
    # a response.failed after the socket opened: a mid-stream rate limit
    assert (failed["outcome"], failed["error_type"], failed["error_code"]) == (
        "error",
        "rate_limited",
        "rate_limit_exceeded",
    )
    assert failed["mid_stream_error"] is True and failed["retry_after_s"] == pytest.approx(11.054)
    # an error event answering the create
    assert (err["outcome"], err["error_type"], err["error_code"]) == (
        "error",
        "bad_request",
        "previous_response_not_found",
    )
    assert again["outcome"] == "ok"
    # frames byte-identical both ways
    sock = socket_log(mock, sid)
    assert sock["received"][:3] == sent
    assert json.loads(sock["received"][3]) == {"type": "response.create", "model": "gpt-4.1", "input": "again"}
    assert [g.decode() for g in got] == sock["sent"]


def test_responses_websocket_cancel_and_server_close(proxied: Sidecar, mock: Mock) -> None:
    sid = session_id()
    with oai().beta.responses.connect(extra_headers=headers(sid)) as conn:
        conn.send_raw(create(metadata={"mock_scenario": "slow"}))
        for _ in range(5):  # created, in_progress, item added, part added, one delta: then the client leaves
            conn.recv_bytes()
    time.sleep(0.5)
    (cut,) = proxied.rows(f"session_id = '{sid}'", 1)
    assert (cut["outcome"], cut["finish_reason"], cut["error_type"]) == ("cancelled", "cancelled", "")
    assert cut["transport"] == "websocket" and cut["content_events"] >= 1
    assert socket_log(mock, sid)["closed"] == "client"

    sid = session_id()
    with pytest.raises(ConnectionClosedError), oai().responses.connect(extra_headers=headers(sid)) as conn:
        conn.send_raw(create(metadata={"mock_scenario": "close_mid"}))
        while True:
            conn.recv_bytes()
    (closed,) = proxied.rows(f"session_id = '{sid}'", 1)
    assert (closed["outcome"], closed["error_type"], closed["mid_stream_error"]) == (
        "error",
        "upstream_disconnected",
        True,
    )
    assert closed["content_events"] == 2 and "closed by the server" in closed["error_message"]


def test_responses_websocket_lanes(proxied: Sidecar, mock: Mock) -> None:
    """Two responses side by side on one socket, told apart by stream_id."""
    sid = session_id()
    with oai().responses.connect(extra_headers=headers(sid)) as conn:
        conn.send_raw(create(stream_id="lane-a", metadata={"mock_scenario": "slow"}))
        conn.send_raw(create(model="gpt-4.1-mini", stream_id="lane-b"))
        done = 0
        while done < 2:
            if json.loads(conn.recv_bytes())["type"] == "response.completed":
                done += 1
    rows = proxied.rows(f"session_id = '{sid}'", 2)
    by_model = {r["request_model"]: r for r in rows}
    assert set(by_model) == {"gpt-4.1", "gpt-4.1-mini"}
    assert all(r["outcome"] == "ok" and r["content_events"] == 6 and r["input_tokens"] == 12033 for r in rows)
    assert by_model["gpt-4.1"]["duration_ms"] > by_model["gpt-4.1-mini"]["duration_ms"]  # the slow lane


def realtime_rows(proxied: Sidecar, sid: str, n: int) -> list[dict[str, Any]]:
    rows = proxied.rows(f"session_id = '{sid}'", n)
    assert len(rows) == n, rows
    for r in rows:
        assert (r["api"], r["operation"], r["transport"], r["provider"]) == (
            "openai.realtime",
            "chat",
            "websocket",
            "openai",
        )
        assert r["request_model"] == "gpt-realtime" and r["stream"] is True
    return rows


def test_realtime_text_audio_usage_errors_and_cancel(proxied: Sidecar, mock: Mock) -> None:
    sid = session_id()
    got: list[bytes] = []
    sent: list[str] = []

    def send(conn: Any, obj: dict[str, Any]) -> None:
        text = json.dumps(obj)
        conn.send_raw(text)
        sent.append(text)

    with oai().realtime.connect(model="gpt-realtime", extra_headers=headers(sid)) as conn:
        got += until(conn, "session.created")
        send(conn, {"type": "response.create", "response": {"output_modalities": ["text"], "max_output_tokens": 200}})
        got += until(conn, "rate_limits.updated")
        send(conn, {"type": "response.create", "response": {"output_modalities": ["audio"]}})
        got += until(conn, "rate_limits.updated")
        send(
            conn,
            {
                "type": "response.create",
                "event_id": "evt_client_7",
                "response": {"metadata": {"mock_scenario": "error"}},
            },
        )
        got += until(conn, "error")
        send(conn, {"type": "response.create", "response": {"metadata": {"mock_scenario": "failed"}}})
        got += until(conn, "rate_limits.updated")
        send(conn, {"type": "response.create", "response": {"metadata": {"mock_scenario": "slow"}}})
        got += until(conn, "response.output_audio.delta")
        send(conn, {"type": "response.cancel"})
        got += until(conn, "rate_limits.updated")
    text, audio, err, failed, cancelled = realtime_rows(proxied, sid, 5)
    for r in (text, audio, failed, cancelled):  # response.usage: text and audio tokens both counted
        assert (r["input_tokens"], r["output_tokens"], r["cache_read_tokens"]) == (160, 60, 64)
        assert r["response_id"].startswith("resp_mock_rt") and r["response_model"] == "gpt-realtime"
    assert (text["outcome"], text["finish_reason"], text["max_output_tokens"], text["content_events"]) == (
        "ok",
        "stop",
        200,
        6,
    )
    assert PACE_MS - 1 <= text["ttfb_ms"] < text["ttft_ms"]  # response.created, then
    assert text["ttft_ms"] >= 3 * PACE_MS - 1  # created, item added, first delta
    assert text["ttft_ms"] + text["decode_ms"] <= text["duration_ms"] + 0.01 and text["decode_ms"] >= PACE_MS - 1
    assert audio["outcome"] == "ok" and audio["content_events"] == 12  # transcript and audio deltas
    assert (err["outcome"], err["error_type"], err["error_code"]) == ("error", "bad_request", "invalid_value")
    assert err["input_tokens"] == 0
    assert (failed["outcome"], failed["error_type"], failed["finish_reason"]) == ("error", "server_error", "error")
    assert (cancelled["outcome"], cancelled["finish_reason"], cancelled["finish_reason_raw"]) == (
        "cancelled",
        "cancelled",
        "client_cancelled",
    )
    assert len({r["connection_id"] for r in (text, audio, err, failed, cancelled)}) == 1
    sock = socket_log(mock, sid)
    assert sock["received"] == sent
    assert [g.decode() for g in got] == sock["sent"]


def test_realtime_server_vad_turn_starts_at_commit(proxied: Sidecar, mock: Mock) -> None:
    sid = session_id()
    chunk = "AAAA" * 120
    pace = 5 * PACE_MS  # a wider pace than the other tests: a busy machine's read delays stay well inside half of it
    with oai().realtime.connect(
        model="gpt-realtime", extra_headers=headers(sid, **{"x-mock-delay-ms": str(pace)})
    ) as conn:
        until(conn, "session.created")
        conn.send_raw(
            json.dumps(
                {
                    "type": "session.update",
                    "session": {
                        "type": "realtime",
                        "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 150}}},
                    },
                }
            )
        )
        until(conn, "session.updated")
        for _ in range(5):
            conn.send_raw(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
        events = [json.loads(e)["type"] for e in until(conn, "rate_limits.updated")]
    assert events[:3] == ["input_audio_buffer.speech_stopped", "input_audio_buffer.committed", "response.created"]
    (row,) = realtime_rows(proxied, sid, 1)
    assert row["outcome"] == "ok" and row["request_bytes"] == 0  # no response.create: the server started it
    # from the commit to response.created: both are server messages, seen as the proxy reads them, so a late
    # read of the first (a busy loop) shortens the gap the mock paced; from anything earlier (speech_stopped,
    # the last append) it would be at least one more pace longer
    assert pace / 2 <= row["ttfb_ms"] <= pace * 1.5, row["ttfb_ms"]


def test_realtime_beta_client_and_refused_upgrade(proxied: Sidecar) -> None:
    sid = session_id()
    with oai().beta.realtime.connect(model="gpt-realtime", extra_headers=headers(sid)) as conn:
        conn.send(
            {"type": "response.create", "response": {"modalities": ["text", "audio"]}}  # type: ignore[typeddict-unknown-key]
        )
        types = [json.loads(e)["type"] for e in until(conn, "rate_limits.updated")]
    assert "response.audio_transcript.delta" in types and "response.audio.delta" in types  # the beta names
    (row,) = realtime_rows(proxied, sid, 1)
    assert row["outcome"] == "ok" and row["content_events"] == 12 and row["input_tokens"] == 160

    sid = session_id()
    with (
        pytest.raises(InvalidStatus),
        oai().realtime.connect(
            model="gpt-realtime", extra_headers=headers(sid, **{"x-mock-scenario": "unauthorized"})
        ) as conn,
    ):
        conn.recv_bytes()
    (refused,) = realtime_rows(proxied, sid, 1)
    assert (refused["status_code"], refused["outcome"], refused["error_type"], refused["error_code"]) == (
        401,
        "error",
        "auth",
        "invalid_api_key",
    )


@contextlib.contextmanager
def opened(proxied: Sidecar, mock: Mock, sid: str) -> Iterator[Any]:
    """A Realtime socket through the sidecar, or a failure within 30 s that says where the upgrade stopped.

    Once (CI, stop 39) an upgrade was not answered within the client's 10 s and websockets' clean-up then waited on
    the socket until the test's 180 s timeout, saying nothing of where it stopped: the mock's log and the sidecar's
    /healthz say it here."""
    manager = oai().realtime.connect(model="gpt-realtime", extra_headers=headers(sid))
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(manager.__enter__()), daemon=True)
    t.start()
    t.join(30)
    if not got:
        seen = [s["headers"].get("x-mock-socket") for s in mock.sockets()].count(sid)
        health = proxied.admin_request("GET", "/healthz")[1].decode(errors="replace")
        pytest.fail(f"the upgrade of {sid} was not answered in 30 s: the mock saw it {seen}x; /healthz {health}")
    try:
        yield got[0]
    finally:
        manager.__exit__(None, None, None)


def test_frames_are_not_held_back(proxied: Sidecar, mock: Mock) -> None:
    """Each server message reaches the client right after the mock sent it, the socket's first
    ones included (the mock logs each message's send time; same clock)."""
    first: list[float] = []
    lags: list[float] = []
    for _ in range(4):
        sid = session_id()
        received: list[float] = []
        with opened(proxied, mock, sid) as conn:
            conn.recv_bytes()  # session.created, sent right after the 101
            received.append(time.time())
            conn.send_raw(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
            while json.loads(conn.recv_bytes())["type"] != "rate_limits.updated":
                received.append(time.time())
            received.append(time.time())
        sent_at = socket_log(mock, sid)["sent_at"]
        assert len(sent_at) == len(received)
        ms = [(r - s) * 1000 for r, s in zip(received, sent_at, strict=True)]
        first.append(ms[0])
        lags += ms
    # A message held back until the next one arrives is late by a whole pace: the median message and the
    # median socket's first message arrive well inside one (a busy machine delays a few, not the median).
    lags.sort()
    first.sort()
    assert lags[len(lags) // 2] < PACE_MS / 2, lags
    # the first: the mock sends nothing more until the client answers it, so a hold-back until the next message
    # would hang; a timed hold-back (~60 ms was once reported) shows on the median socket
    assert first[len(first) // 2] < PACE_MS, first


def test_a_large_fragmented_create_is_answered(proxied: Sidecar, mock: Mock) -> None:
    """A 200 KB response.create (Codex sends ~74 KB and more), sent as 50 fragments in separate TCP writes: the
    mock answers the whole message, however its pieces arrive."""
    from llmtap.testing.rawws import RawWebSocket

    sid = session_id()
    ws = RawWebSocket("api.openai.com", "/v1/responses", headers(sid), proxied.bundle, ("127.0.0.1", proxied.listen))
    message = create(instructions="x" * 200_000)
    for frame in ws.out.fragments(message, 50):
        ws.send(frame)  # a write each
    got = ws.until("response.completed")
    ws.close()
    assert json.loads(got[-1])["response"]["status"] == "completed"
    sock = socket_log(mock, sid)
    assert sock["received"] == [message]  # one message, whole
    (row,) = proxied.rows(f"session_id = '{sid}'", 1)
    assert (row["outcome"], row["input_tokens"], row["output_tokens"]) == ("ok", 12033, 44)
