"""Anthropic Messages adapter on recorded real responses (tests/corpus); values read off the bytes."""

from __future__ import annotations

import json

from corpus import check
from llmtap.adapters import AnthropicMessages
from llmtap.capture import taxonomy
from llmtap.decode import SSEEvent

OK = {"status_code": 200, "outcome": "ok", "error_type": "", "error_code": ""}


def test_thinking_stream_reports_no_reasoning_count() -> None:
    # anthropic/thinking_stream.sse: a thinking block (14 thinking_delta, one of them empty, one
    # signature_delta) then a text block (95 text_delta); message_start usage {input 43, output 1
    # (a placeholder)}, message_delta {input 43, output 282}. Anthropic reports no thinking count:
    # reasoning_tokens stays 0 while output_tokens (282) includes the thinking (docs/how-it-works.md).
    check(
        "anthropic/thinking_stream.sse",
        {
            **OK,
            "provider": "anthropic",
            "api": "anthropic.messages",
            "request_model": "claude-sonnet-4-0",
            "response_model": "claude-sonnet-4-20250514",
            "response_id": "msg_01ALwQ87pTS7hH1PjSdC9wJD",
            "stream": True,
            "finish_reason": "stop",
            "finish_reason_raw": "end_turn",
            "input_tokens": 43,
            "output_tokens": 282,
            "reasoning_tokens": 0,
            "usage_source": "provider",
            "content_events": 13 + 95,
            "service_tier": "standard",  # message_start usage.service_tier
        },
    )


def test_server_tool_web_search_stream() -> None:
    # anthropic/web_search_stream.sse: two server_tool_use blocks (web_search) with 15
    # input_json_delta of which 2 are empty, two web_search_tool_result blocks, 48 text_delta,
    # citations; message_delta usage {input 31772, output 644, server_tool_use.web_search_requests 2}.
    # The searches ran on Anthropic's side: billed server tool uses, nothing for the client to run (issue #27).
    check(
        "anthropic/web_search_stream.sse",
        {
            **OK,
            "tool_calls": 0,
            "server_tool_calls": {"web_search": 2},
            "content_events": 2 + 13 + 48,
            "input_tokens": 31772,
            "output_tokens": 644,
            "finish_reason": "stop",
        },
    )


def test_tool_use_stream_empty_input_delta_is_not_content() -> None:
    # anthropic/tool_use_stream.sse: two text_delta, a tool_use block start, and one
    # input_json_delta with partial_json "" (a tool without arguments): 3 content events.
    check(
        "anthropic/tool_use_stream.sse",
        {
            **OK,
            "tool_calls": 1,
            "content_events": 3,
            "finish_reason": "tool_calls",
            "input_tokens": 565,
            "output_tokens": 48,
        },
    )


def test_tool_use_json() -> None:
    # anthropic/tool_use.json: one tool_use block, stop_reason tool_use, usage {input 445, output 23}
    check(
        "anthropic/tool_use.json",
        {
            **OK,
            "stream": False,
            "tool_calls": 1,
            "finish_reason": "tool_calls",
            "input_tokens": 445,
            "output_tokens": 23,
        },
    )


def test_cache_read_and_5m_write_inclusive_input() -> None:
    # anthropic/cache_5m_write.json: usage {input_tokens 3, cache_read_input_tokens 1111,
    # cache_creation_input_tokens 418 = cache_creation.ephemeral_5m 418 + ephemeral_1h 0}:
    # input = 3 + 1111 + 418.
    check(
        "anthropic/cache_5m_write.json",
        {
            **OK,
            "input_tokens": 3 + 1111 + 418,
            "cache_read_tokens": 1111,
            "cache_write_tokens": 418,
            "cache_write_1h_tokens": 0,
            "output_tokens": 33,
        },
    )


def test_cache_write_1h_split() -> None:
    # The 1-hour part of a cache write (cache_creation.ephemeral_1h_input_tokens), as documented by
    # Anthropic; no recording in the corpus writes with a 1-hour TTL.
    a = AnthropicMessages()
    usage = (
        '{"input_tokens":10,"cache_creation_input_tokens":1000,"cache_read_input_tokens":0,'
        '"cache_creation":{"ephemeral_5m_input_tokens":400,"ephemeral_1h_input_tokens":600},"output_tokens":1}'
    )
    a.on_event(SSEEvent("message_start", '{"type":"message_start","message":{"id":"m","usage":' + usage + "}}"), 1.0)
    assert a.obs.usage is not None
    assert (a.obs.usage.input, a.obs.usage.cache_write, a.obs.usage.cache_write_1h) == (1010, 1000, 600)


def test_http_errors_keep_error_type_as_code() -> None:
    # anthropic/error_400_invalid_request.json: {"type":"error","error":{"type":"invalid_request_error",...}}
    check(
        "anthropic/error_400_invalid_request.json",
        {"status_code": 400, "outcome": "error", "error_type": "bad_request", "error_code": "invalid_request_error"},
    )
    # anthropic/error_404_not_found.json: {"error":{"type":"not_found_error","message":"model: ..."}}
    check(
        "anthropic/error_404_not_found.json",
        {"status_code": 404, "error_type": "not_found", "error_code": "not_found_error", "stream": False},
    )


def test_in_stream_error_keeps_its_type_and_class() -> None:
    # Anthropic's in-stream error event, as documented: {"type":"error","error":{"type":...}}
    for etype, expected in (("overloaded_error", "overloaded"), ("invalid_request_error", "bad_request")):
        a = AnthropicMessages()
        a.on_event(SSEEvent("error", json.dumps({"type": "error", "error": {"type": etype, "message": "m"}})), 1.0)
        assert a.obs.error is not None and a.obs.error.code == etype
        err = a.obs.error
        assert taxonomy.classify(0, err.code, err.type, err.message, err.status) == expected
