"""The per-socket capture: each finished call becomes a capture of its own, with the socket's
facts, its own start, first event and bytes; a socket's end cuts the calls still open."""

from __future__ import annotations

import json
from typing import Any

from llmtap.adapters import OpenAIResponsesWS
from llmtap.capture import Capture, End, RequestFacts, build
from llmtap.capture.ws import WSConnection

FACTS = RequestFacts(
    method="GET",
    host="api.openai.com",
    port=443,
    path="/v1/responses",
    headers=[("user-agent", "OpenAI/Python 3.57.0"), ("authorization", "Bearer sk-x")],
    body=b"",
    start_wall=1000.0,
    start_mono=50.0,
    provider="openai",
    api="openai.responses",
    service="svc",
    transport="websocket",
    connection_id="conn-1",
    trace_id="t" * 32,
)
UPGRADE = [("x-request-id", "req_ws"), ("x-ratelimit-remaining-requests", "99")]


def socket() -> tuple[WSConnection, list[tuple[Capture, End]]]:
    out: list[tuple[Capture, End]] = []
    return WSConnection(FACTS, OpenAIResponsesWS(), lambda c, e: out.append((c, e)), UPGRADE), out


def msg(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


CREATE = msg({"type": "response.create", "model": "gpt-4.1", "input": "hi"})
EVENTS = [
    msg({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
    msg({"type": "response.output_text.delta", "delta": "Hi"}),
    msg(
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "usage": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12},
            },
        }
    ),
]


def test_a_finished_call_is_a_capture_of_its_own() -> None:
    ws, out = socket()
    ws.on_message(True, CREATE, 60.0)
    for i, ev in enumerate(EVENTS):
        ws.on_message(False, ev, 60.5 + i)
    ((cap, end),) = out
    assert (end.kind, end.mono) == ("complete", 62.5)
    f = cap.facts
    assert (f.body, f.start_mono, f.start_wall) == (CREATE, 60.0, 1010.0)  # the message's own receive time
    assert f.span_id and f.trace_id != FACTS.trace_id  # a trace per call unless the upgrade carried one
    assert (cap.status, cap.headers_mono, cap.streamed) == (101, 60.5, True)
    assert cap.response_bytes == sum(len(e) for e in EVENTS)
    r, ctx = build(cap, end, None)
    assert (r.transport, r.connection_id, r.request_model, r.outcome) == ("websocket", "conn-1", "gpt-4.1", "ok")
    assert (r.ttfb_ms, r.ttft_ms, r.duration_ms) == (500.0, 1500.0, 2500.0)
    assert (r.input_tokens, r.output_tokens, r.request_id, r.client_name) == (10, 2, "req_ws", "openai-python")
    assert r.ratelimit_headers == {"x-ratelimit-remaining-requests": "99"} and ctx.request["model"] == "gpt-4.1"


def test_the_socket_closing_cuts_the_open_call() -> None:
    for by_client, kind, outcome in ((True, "client_disconnected", "cancelled"), (False, "upstream_error", "error")):
        ws, out = socket()
        ws.on_message(True, CREATE, 60.0)
        ws.on_message(False, EVENTS[0], 60.1)
        ws.on_message(False, EVENTS[1], 60.2)
        ws.on_close(by_client, 61.0, "code 1011")
        ((cap, end),) = out
        assert end.kind == kind and "before the response finished (code 1011)" in end.message
        r, _ = build(cap, end, None)
        assert r.outcome == outcome and r.content_events == 1


def test_a_parse_failure_stops_parsing_the_socket_but_not_the_traffic() -> None:
    ws, out = socket()

    def boom(*a: Any) -> None:
        raise RuntimeError("boom")

    ws.adapter.on_server = boom  # type: ignore[method-assign]
    ws.on_message(True, CREATE, 60.0)
    ws.on_message(False, EVENTS[0], 60.1)
    ws.on_message(False, EVENTS[2], 60.2)  # ignored: parsing stopped
    assert not ws.parsing and "boom" in ws.parse_error and ws.messages == 3
    ws.on_close(None, 61.0)
    ((cap, end),) = out
    assert cap.parse_error.startswith("RuntimeError") and end.kind == "upstream_error"


def test_binary_and_non_json_messages_pass_unparsed() -> None:
    ws, out = socket()
    ws.on_message(True, b"\x00\x01audio", 60.0)
    ws.on_message(False, b"not json", 60.1)
    assert out == [] and ws.parsing and ws.messages == 2
