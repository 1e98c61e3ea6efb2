"""The WebSocket adapters: which call each message belongs to, and what each call observed.

Messages are the shapes the openai SDK's types declare (ResponsesServerEvent, the Realtime
server events) and the ones Codex and the mock send; expected values are read off them.
"""

from __future__ import annotations

import json
from typing import Any

from llmtap.adapters import OpenAIRealtime, OpenAIResponsesWS, Turn, WSAdapter


def client(a: WSAdapter, obj: dict[str, Any], t: float) -> None:
    a.on_client(obj, json.dumps(obj).encode(), t)


def server(a: WSAdapter, obj: dict[str, Any], t: float) -> list[Turn]:
    text = json.dumps(obj)
    a.on_server(obj, text, len(text), t)
    return a.take()


RESP = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "gpt-4.1-2025-04-14", "usage": None}
USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 40},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 109,
}


def responses_stream(a: OpenAIResponsesWS, t0: float, lane: str = "", rid: str = "resp_1") -> list[Turn]:
    extra = {"stream_id": lane} if lane else {}
    done: list[Turn] = []
    events: list[dict[str, Any]] = [
        {"type": "response.created", "sequence_number": 0, "response": {**RESP, "id": rid}},
        {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "m", "delta": "Hi"},
        {"type": "response.output_text.delta", "sequence_number": 2, "item_id": "m", "delta": " there"},
        {
            "type": "response.completed",
            "sequence_number": 3,
            "response": {**RESP, "id": rid, "status": "completed", "usage": USAGE},
        },
    ]
    for i, ev in enumerate(events):
        done += server(a, {**ev, **extra}, t0 + 0.1 * (i + 1))
    return done


def test_responses_one_call_per_create_with_its_own_timings() -> None:
    a = OpenAIResponsesWS()
    client(a, {"type": "response.create", "model": "gpt-4.1", "input": "hi", "max_output_tokens": 50}, 10.0)
    (turn,) = responses_stream(a, 10.0)
    assert (turn.start, turn.first_server, turn.end) == (10.0, 10.1, 10.4)
    call = turn.adapter
    assert (call.req.model, call.req.stream, call.req.max_output_tokens) == ("gpt-4.1", True, 50)
    assert call.obs.usage is not None and (call.obs.usage.input, call.obs.usage.cache_read) == (100, 40)
    assert (call.obs.clock.first, call.obs.clock.count) == (10.2, 2) and call.obs.terminal
    assert "".join(call.obs.output_text) == "Hi there"
    # the next create on the same socket is a new call
    client(a, {"type": "response.create", "model": "gpt-4.1-mini"}, 20.0)
    (second,) = responses_stream(a, 20.0, rid="resp_2")
    assert second.adapter.req.model == "gpt-4.1-mini" and second.adapter.obs.response_id == "resp_2"
    assert a.close() == []


def test_responses_lanes_are_separate_calls() -> None:
    a = OpenAIResponsesWS()
    client(a, {"type": "response.create", "model": "a", "stream_id": "L1"}, 1.0)
    client(a, {"type": "response.create", "model": "b", "stream_id": "L2"}, 1.0)
    server(a, {"type": "response.created", "stream_id": "L1", "response": {**RESP, "id": "r1"}}, 1.1)
    (b,) = responses_stream(a, 1.0, lane="L2", rid="r2")
    assert b.adapter.req.model == "b" and b.adapter.obs.response_id == "r2"
    (open_a,) = a.close()  # L1 never finished
    assert open_a.adapter.req.model == "a" and not open_a.adapter.obs.terminal


def test_responses_error_event_ends_the_call_with_its_stated_status() -> None:
    a = OpenAIResponsesWS()
    client(a, {"type": "response.create", "model": "gpt-4.1"}, 1.0)
    (turn,) = server(
        a,
        {
            "type": "error",
            "status": 429,
            "error": {"type": "usage_limit_reached", "code": "rate_limit_exceeded", "message": "slow down"},
        },
        1.2,
    )
    err = turn.adapter.obs.error
    assert err is not None and (err.code, err.status) == ("rate_limit_exceeded", 429)
    assert server(a, {"type": "error", "error": {"message": "about nothing asked"}}, 2.0) == []


def test_responses_steer_and_unknown_messages_start_no_call() -> None:
    a = OpenAIResponsesWS()
    client(a, {"type": "response.steer", "input": [], "previous_response_id": "r"}, 1.0)
    a.on_client(None, b"\x00binary", 1.0)
    assert a.close() == [] and server(a, {"type": "response.created", "response": RESP}, 1.1) == []


RT_USAGE = {
    "total_tokens": 220,
    "input_tokens": 160,
    "output_tokens": 60,
    "input_token_details": {"text_tokens": 120, "audio_tokens": 40, "cached_tokens": 64},
    "output_token_details": {"text_tokens": 12, "audio_tokens": 48},
}


def rt_response(a: OpenAIRealtime, rid: str, t0: float, status: str = "completed", **done: Any) -> list[Turn]:
    out = server(a, {"type": "response.created", "response": {"id": rid, "status": "in_progress"}}, t0 + 0.1)
    out += server(a, {"type": "response.output_audio_transcript.delta", "response_id": rid, "delta": "Hel"}, t0 + 0.2)
    out += server(a, {"type": "response.output_audio.delta", "response_id": rid, "delta": "AAAA"}, t0 + 0.2)
    out += server(a, {"type": "response.text.delta", "response_id": rid, "delta": "lo"}, t0 + 0.3)  # a beta name
    resp = {"id": rid, "status": status, "usage": RT_USAGE, **done}
    return out + server(a, {"type": "response.done", "response": resp}, t0 + 0.5)


def test_realtime_call_per_response_done_with_text_and_audio_usage() -> None:
    a = OpenAIRealtime("gpt-realtime")
    server(a, {"type": "session.created", "session": {"id": "s", "model": "gpt-realtime-2025-08-28"}}, 0.0)
    client(a, {"type": "response.create", "response": {"max_output_tokens": 300}}, 1.0)
    (turn,) = rt_response(a, "r1", 1.0)
    call = turn.adapter
    assert (turn.start, turn.first_server, turn.end) == (1.0, 1.1, 1.5)
    assert (call.req.model, call.obs.response_model, call.req.max_output_tokens) == (
        "gpt-realtime",
        "gpt-realtime-2025-08-28",
        300,
    )
    u = call.obs.usage
    assert u is not None and (u.input, u.output, u.cache_read) == (160, 60, 64)
    assert call.obs.clock.count == 3 and call.obs.clock.first == 1.2  # transcript, audio, text deltas
    assert "".join(call.obs.output_text) == "Hello" and (call.obs.finish, call.obs.terminal) == ("stop", True)


def test_realtime_usage_falls_back_to_the_modalities() -> None:
    from llmtap.adapters.openai_realtime import parse_realtime_usage

    u = parse_realtime_usage(
        {"input_token_details": {"text_tokens": 5, "audio_tokens": 7}, "output_token_details": {"audio_tokens": 3}}
    )
    assert (u.input, u.output) == (12, 3)


def test_realtime_vad_turn_starts_at_the_commit_and_creates_win_over_it() -> None:
    a = OpenAIRealtime("m")
    server(a, {"type": "input_audio_buffer.committed", "item_id": "i1"}, 5.0)
    (vad,) = rt_response(a, "r1", 5.2)
    assert vad.start == 5.0 and vad.raw == b"" and vad.request is None
    server(a, {"type": "input_audio_buffer.committed", "item_id": "i2"}, 9.0)
    client(a, {"type": "response.create"}, 9.5)
    (asked,) = rt_response(a, "r2", 9.5)
    assert asked.start == 9.5 and asked.raw


def test_realtime_error_fails_the_create_it_names() -> None:
    a = OpenAIRealtime("m")
    client(a, {"type": "response.create", "event_id": "e1"}, 1.0)
    client(a, {"type": "response.create", "event_id": "e2"}, 1.0)
    assert server(a, {"type": "error", "error": {"type": "invalid_request_error", "event_id": "e9"}}, 1.1) == []
    (failed,) = server(
        a, {"type": "error", "error": {"code": "invalid_value", "message": "bad", "event_id": "e2"}}, 1.2
    )
    assert failed.request["event_id"] == "e2" and failed.adapter.obs.error is not None
    (left,) = a.close()
    assert left.request["event_id"] == "e1"


def test_realtime_cancelled_failed_and_incomplete() -> None:
    a = OpenAIRealtime("m")
    client(a, {"type": "response.create"}, 1.0)
    (c,) = rt_response(a, "r1", 1.0, "cancelled", status_details={"type": "cancelled", "reason": "turn_detected"})
    assert (c.adapter.obs.finish, c.adapter.obs.finish_raw, c.adapter.obs.terminal) == (
        "cancelled",
        "turn_detected",
        False,
    )
    assert c.adapter.obs.usage_final  # billed even though cut
    client(a, {"type": "response.create"}, 2.0)
    details = {"type": "failed", "error": {"type": "server_error", "code": "server_error"}}
    (f,) = rt_response(a, "r2", 2.0, "failed", status_details=details)
    assert f.adapter.obs.error is not None and f.adapter.obs.error.code == "server_error"
    client(a, {"type": "response.create"}, 3.0)
    (i,) = rt_response(a, "r3", 3.0, "incomplete", status_details={"type": "incomplete", "reason": "max_output_tokens"})
    assert (i.adapter.obs.finish, i.adapter.obs.terminal) == ("length", True)


def test_realtime_out_of_band_responses_side_by_side() -> None:
    a = OpenAIRealtime("m")
    client(a, {"type": "response.create", "response": {"conversation": "none"}}, 1.0)
    client(a, {"type": "response.create"}, 1.0)
    server(a, {"type": "response.created", "response": {"id": "a"}}, 1.1)
    server(a, {"type": "response.created", "response": {"id": "b"}}, 1.1)
    server(a, {"type": "response.output_text.delta", "response_id": "b", "delta": "x"}, 1.2)
    (b,) = server(a, {"type": "response.done", "response": {"id": "b", "status": "completed"}}, 1.3)
    assert b.adapter.obs.response_id == "b" and b.adapter.obs.clock.count == 1
    (a_open,) = a.close()
    assert a_open.adapter.obs.response_id == "a" and a_open.adapter.obs.clock.count == 0


def test_calls_never_answered_are_bounded() -> None:
    from llmtap.adapters.websocket import MAX_OPEN_CALLS

    for a in (OpenAIResponsesWS(), OpenAIRealtime("m")):
        given_up: list[Turn] = []
        for i in range(MAX_OPEN_CALLS * 3):
            client(a, {"type": "response.create", "event_id": f"e{i}"}, float(i))
            given_up += a.take()
        assert len(given_up) == MAX_OPEN_CALLS * 2 and len(a.close()) == MAX_OPEN_CALLS
        assert given_up[0].start == 0.0 and not given_up[0].adapter.obs.terminal
    a = OpenAIRealtime("m")
    dropped = [
        t
        for i in range(MAX_OPEN_CALLS + 5)
        for t in server(a, {"type": "response.created", "response": {"id": f"r{i}"}}, float(i))
    ]
    assert [t.adapter.obs.response_id for t in dropped] == ["r0", "r1", "r2", "r3", "r4"]
    assert len(a.close()) == MAX_OPEN_CALLS
