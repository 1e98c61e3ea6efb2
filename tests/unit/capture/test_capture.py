"""Capture + adapters without a proxy: realistic streams (the mock's own replies) under random chunking."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmtap.testing import builders, mock

STABLE = (
    "provider",
    "api",
    "operation",
    "request_model",
    "response_model",
    "response_id",
    "stream",
    "status_code",
    "outcome",
    "error_type",
    "error_code",
    "error_message",
    "mid_stream_error",
    "finish_reason",
    "finish_reason_raw",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "usage_source",
    "content_events",
    "tool_calls",
    "max_output_tokens",
    "response_bytes",
    "request_hash",
)


SCENARIOS = [
    (
        "/v1/chat/completions",
        {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}},
        "cached_reasoning",
    ),
    ("/v1/chat/completions", {"model": "gpt-4o", "stream": True}, "gzip"),
    ("/v1/chat/completions", {"model": "gpt-4o", "stream": True}, "crlf"),
    ("/v1/chat/completions", {"model": "gpt-4o", "stream": True}, "tool_calls"),
    ("/v1/chat/completions", {"model": "gpt-4o", "stream": True}, "mid_stream_error"),
    ("/v1/chat/completions", {"model": "gpt-4o"}, "quota_429"),
    ("/v1/responses", {"model": "gpt-4.1", "stream": True}, "default"),
    ("/v1/responses", {"model": "gpt-4.1", "stream": True}, "failed_rate_limit"),
    ("/v1/completions", {"model": "x", "stream": True}, "default"),
    ("/v1/messages", {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 5}, "default"),
    (
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 5},
        "overloaded_mid_stream",
    ),
    ("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 5}, "overloaded_529"),
]


@pytest.mark.parametrize(("path", "body", "scenario"), SCENARIOS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(0, 10_000), max_size=30))
def test_record_does_not_depend_on_chunking(path: str, body: dict[str, Any], scenario: str, cuts: list[int]) -> None:
    whole = builders.mock_record(path, body, scenario)
    split = builders.mock_record(path, body, scenario, cuts)
    assert {k: getattr(split, k) for k in STABLE} == {k: getattr(whole, k) for k in STABLE}
    assert not whole.parse_error


def test_cancel_after_terminal_event_is_ok_before_is_cancelled() -> None:
    done = builders.mock_record(
        "/v1/chat/completions", {"model": "gpt-4o", "stream": True}, "default", end="client_disconnected"
    )
    assert done.outcome == "ok"
    reply = mock.plan("/v1/chat/completions", {}, {"model": "gpt-4o", "stream": True})
    cap = builders.capture("/v1/chat/completions", b'{"model":"gpt-4o"}')
    builders.respond(cap, 200, reply.headers, reply.chunks[:4])
    r = builders.finish(cap, "client_disconnected")[0]
    assert (r.outcome, r.finish_reason, r.content_events, r.usage_source) == (
        "cancelled",
        "cancelled",
        3,
        "estimated",
    )
    assert r.output_tokens > 0


def test_parser_failure_is_contained_and_bytes_unchanged() -> None:
    errors: list[str] = []
    cap = builders.capture("/v1/chat/completions", b"{}", on_parse_error=lambda api, e: errors.append(api))

    def boom(*a: Any) -> None:
        raise RuntimeError("adapter bug")

    cap.adapter.on_event = boom  # type: ignore[method-assign]
    chunks = (b'data: {"choices":[]}\n\n', b"data: [DONE]\n\n")
    builders.respond(cap, 200, [("content-type", "text/event-stream")], chunks)
    assert errors == ["openai.chat_completions"] and cap.parsing is False
    r = builders.finish(cap)[0]
    assert r.status_code == 200 and r.response_bytes == sum(map(len, chunks))
    assert "adapter bug" in r.parse_error
    assert r.outcome == "ok"  # the transport completed; a parser bug is not an upstream failure


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=2000),
    st.sampled_from(["/v1/chat/completions", "/v1/responses", "/v1/messages"]),
    st.sampled_from(["text/event-stream", "application/json"]),
)
def test_garbage_bodies_never_raise(data: bytes, path: str, ctype: str) -> None:
    cap = builders.capture(path, data[:50], host="api.anthropic.com" if "messages" in path else "api.openai.com")
    assert cap.facts.api
    builders.respond(cap, 200, [("content-type", ctype)], [data])
    r = builders.finish(cap)[0]
    assert r.response_bytes == len(data)


def test_buffered_json_bodies_share_one_bound() -> None:
    """Finding 17: no global cap on buffered response bytes (many large JSON bodies at once)."""
    from llmtap.capture.tee import BUFFERED, MAX_BUFFERED
    from llmtap.decode.body import BodyTooLarge, JSONBody

    bodies = [JSONBody(16 << 20, BUFFERED) for _ in range(MAX_BUFFERED // (8 << 20) + 2)]
    refused = 0
    for b in bodies:
        try:
            b.feed(b" " * (8 << 20))
        except BodyTooLarge:
            refused += 1
    assert refused == 2 and BUFFERED.used == MAX_BUFFERED
    for b in bodies:
        b.flush()
    assert BUFFERED.used == 0


def test_a_compressed_stream_arriving_at_once_is_parsed_whole() -> None:
    """The event loop parses at most LOOP_STEP decoded bytes per chunk; a real compressed stream that arrives
    in one burst (a buffering proxy, a replay) inflates faster than that: the rest is parsed on the worker,
    and the record still has every event and the usage."""
    import gzip

    from llmtap.capture import tee

    n = 3000
    events = [
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
         "choices": [{"index": 0, "delta": {"content": f" word{i}"}, "finish_reason": None}]}
        for i in range(n)
    ]  # fmt: skip
    events.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})  # fmt: skip
    usage = {"prompt_tokens": 31, "completion_tokens": n, "total_tokens": 31 + n}
    events.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
                   "choices": [], "usage": usage})  # fmt: skip
    raw = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    wire = gzip.compress(raw)
    assert len(raw) > 40 * tee.LOOP_STEP and len(raw) < tee.MAX_DEFERRED_STREAM  # inflates far faster than a step
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    headers = [("content-type", "text/event-stream"), ("content-encoding", "gzip")]
    pieces = [wire[i : i + 16 * 1024] for i in range(0, len(wire), 16 * 1024)]
    rec = builders.record("/v1/chat/completions", body, 200, headers, pieces)
    assert (rec.output_tokens, rec.usage_source, rec.finish_reason) == (n, "provider", "stop")
    assert rec.content_events == n
