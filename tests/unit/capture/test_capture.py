"""Capture + adapters without a proxy: realistic streams (the mock's own replies) under random chunking."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmtap.adapters import ADAPTERS, route
from llmtap.capture import Capture, End, RequestFacts, build
from llmtap.capture.estimate import TokenEstimator
from llmtap.testing import mock

OFFLINE = TokenEstimator(loader=lambda name: (_ for _ in ()).throw(OSError("offline")))


def run_capture(
    path: str,
    body: dict[str, Any],
    scenario: str,
    cuts: list[int] | None = None,
    host: str = "api.openai.com",
    end_kind: str = "complete",
) -> Any:
    reply = mock.plan(path, {"x-mock-scenario": scenario} if scenario else {}, body)
    match = route("POST", host, path, frozenset({"anthropic-version"} if "messages" in path else set()))
    assert match is not None
    api = match.api
    raw_body = json.dumps(body).encode()
    now = time.monotonic()
    facts = RequestFacts(
        method="POST",
        host=host,
        port=443,
        path=path,
        headers=[],
        body=raw_body,
        start_wall=time.time(),
        start_mono=now,
        provider=match.provider,
        api=api,
        trace_id="a" * 32,
        span_id="b" * 16,
    )
    cap = Capture(facts, match.adapter())
    cap.on_response_headers(reply.status, [(k, v) for k, v in reply.headers], now + 0.001)
    data = b"".join(reply.chunks)
    points = sorted({c % (len(data) + 1) for c in (cuts or [])})
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        assert cap.tee(data[a:b]) == data[a:b]
    cap.tee(b"")
    return build(cap, End(end_kind, time.monotonic()), OFFLINE)[0]


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
    whole = run_capture(path, body, scenario)
    split = run_capture(path, body, scenario, cuts)
    assert {k: getattr(split, k) for k in STABLE} == {k: getattr(whole, k) for k in STABLE}
    assert not whole.parse_error


def test_cancel_after_terminal_event_is_ok_before_is_cancelled() -> None:
    done = run_capture(
        "/v1/chat/completions", {"model": "gpt-4o", "stream": True}, "default", end_kind="client_disconnected"
    )
    assert done.outcome == "ok"
    reply = mock.plan("/v1/chat/completions", {}, {"model": "gpt-4o", "stream": True})
    facts = RequestFacts(
        "POST",
        "api.openai.com",
        443,
        "/v1/chat/completions",
        [],
        b'{"model":"gpt-4o"}',
        time.time(),
        time.monotonic(),
        "openai",
        "openai.chat_completions",
    )
    cap = Capture(facts, ADAPTERS["openai.chat_completions"]())
    cap.on_response_headers(200, reply.headers, time.monotonic())
    for c in reply.chunks[:4]:
        cap.tee(c)
    r = build(cap, End("client_disconnected", time.monotonic()), OFFLINE)[0]
    assert (r.outcome, r.finish_reason, r.content_events, r.usage_source) == (
        "cancelled",
        "cancelled",
        3,
        "estimated",
    )
    assert r.output_tokens > 0


def test_parser_failure_is_contained_and_bytes_unchanged() -> None:
    errors: list[str] = []
    facts = RequestFacts(
        "POST",
        "api.openai.com",
        443,
        "/v1/chat/completions",
        [],
        b"{}",
        time.time(),
        time.monotonic(),
        "openai",
        "openai.chat_completions",
    )
    cap = Capture(facts, ADAPTERS["openai.chat_completions"](), lambda api, e: errors.append(api))

    def boom(*a: Any) -> None:
        raise RuntimeError("adapter bug")

    cap.adapter.on_event = boom  # type: ignore[method-assign]
    cap.on_response_headers(200, [("content-type", "text/event-stream")], time.monotonic())
    chunks = (b'data: {"choices":[]}\n\n', b"data: [DONE]\n\n")
    for chunk in chunks:
        assert cap.tee(chunk) == chunk
    assert errors == ["openai.chat_completions"] and cap.parsing is False
    r = build(cap, End("complete", time.monotonic()), OFFLINE)[0]
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
    match = route("POST", "api.anthropic.com" if "messages" in path else "api.openai.com", path, frozenset())
    assert match is not None and match.api
    facts = RequestFacts("POST", "h", 443, path, [], data[:50], time.time(), time.monotonic(), "openai", match.api)
    cap = Capture(facts, match.adapter())
    cap.on_response_headers(200, [("content-type", ctype)], time.monotonic())
    assert cap.tee(data) == data
    r = build(cap, End("complete", time.monotonic()), OFFLINE)[0]
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
    match = route("POST", "api.openai.com", "/v1/chat/completions", frozenset())
    assert match is not None
    now = time.monotonic()
    facts = RequestFacts(
        method="POST", host="api.openai.com", port=443, path="/v1/chat/completions", headers=[],
        body=json.dumps(body).encode(), start_wall=time.time(), start_mono=now, provider=match.provider,
        api=match.api, trace_id="a" * 32, span_id="b" * 16,
    )  # fmt: skip
    cap = Capture(facts, match.adapter())
    cap.on_response_headers(200, [("content-type", "text/event-stream"), ("content-encoding", "gzip")], now)
    for i in range(0, len(wire), 16 * 1024):
        assert cap.tee(wire[i : i + 16 * 1024]) == wire[i : i + 16 * 1024]
    cap.tee(b"")
    rec = build(cap, End("complete", time.monotonic()), OFFLINE)[0]
    assert (rec.output_tokens, rec.usage_source, rec.finish_reason) == (n, "provider", "stop")
    assert rec.content_events == n
