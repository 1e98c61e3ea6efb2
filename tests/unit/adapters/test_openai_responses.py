"""OpenAI Responses adapter on recorded real responses (tests/corpus); values read off the bytes."""

from __future__ import annotations

from corpus import check
from llmtap.adapters import OpenAIResponses
from llmtap.decode import SSEEvent


def test_responses_stream_flex_tier_tool_call() -> None:
    # openai/responses_stream_flex_tool.sse: request service_tier "flex", response.* events say
    # "service_tier":"flex"; one function_call item (final_result); response.completed usage
    # {input 53, output 469, reasoning 448, total 522 = 53 + 469}.
    check(
        "openai/responses_stream_flex_tool.sse",
        {
            "provider": "openai",
            "api": "openai.responses",
            "request_model": "gpt-5",
            "response_model": "gpt-5-2025-08-07",
            "response_id": "resp_0050471a34b36ae60068c97b94a480819587a9d70cf2979b33",
            "stream": True,
            "outcome": "ok",
            "finish_reason": "tool_calls",
            "finish_reason_raw": "completed",
            "tool_calls": 1,
            "input_tokens": 53,
            "output_tokens": 469,
            "reasoning_tokens": 448,
            "usage_source": "provider",
            "service_tier": "flex",
            "request_service_tier": "flex",
            # one output_item.added (function_call) + 6 non-empty function_call_arguments.delta
            "content_events": 7,
        },
    )


def test_responses_stream_of_padded_text_deltas() -> None:
    # openai/responses_stream_text.sse: 79 response.output_text.delta events (none empty), each with its own
    # "obfuscation" padding and sequence_number; response.completed: status completed, model
    # gpt-4.1-nano-2025-04-14, tier default, usage {input 18, cached 0, output 80, reasoning 0, total 98}.
    check(
        "openai/responses_stream_text.sse",
        {
            "provider": "openai",
            "api": "openai.responses",
            "request_model": "gpt-4.1-nano",
            "response_model": "gpt-4.1-nano-2025-04-14",
            "response_id": "resp_0a5e72c4d8eb43c50069cbcbf7fa78819b82d7e42163ef3bd0",
            "stream": True,
            "outcome": "ok",
            "finish_reason": "stop",
            "finish_reason_raw": "completed",
            "tool_calls": 0,
            "input_tokens": 18,
            "output_tokens": 80,
            "reasoning_tokens": 0,
            "usage_source": "provider",
            "service_tier": "default",
            "content_events": 79,
        },
    )


def test_responses_json_with_reasoning() -> None:
    # openai/responses_reasoning.json: status completed, usage {34, 226, reasoning 59}, tier default
    check(
        "openai/responses_reasoning.json",
        {
            "stream": False,
            "outcome": "ok",
            "finish_reason": "stop",
            "finish_reason_raw": "completed",
            "input_tokens": 34,
            "output_tokens": 226,
            "reasoning_tokens": 59,
            "service_tier": "default",
        },
    )


def test_responses_failed_stream_is_quota() -> None:
    # openai/responses_stream_failed_quota.sse: response.created, response.in_progress, an `error`
    # event {"type":"insufficient_quota","code":"insufficient_quota"} then response.failed.
    check(
        "openai/responses_stream_failed_quota.sse",
        {
            "status_code": 200,
            "outcome": "error",
            "mid_stream_error": True,
            "error_type": "quota_exhausted",
            "error_code": "insufficient_quota",
            "finish_reason": "error",
            "finish_reason_raw": "failed",
            "content_events": 0,
            "stream": True,
        },
    )


def test_responses_400_to_a_stream_request_is_a_stream_row() -> None:
    # openai/responses_400.json: the request said "stream": true; the answer is a 400 JSON body.
    # stream is what the request asked for, so the row says stream = true.
    check(
        "openai/responses_400.json",
        {
            "status_code": 400,
            "stream": True,
            "error_type": "bad_request",
            "error_code": "decimal_below_min_value",
            "content_events": 0,
        },
    )


def test_empty_deltas_are_not_content() -> None:
    a = OpenAIResponses()
    a.on_event(SSEEvent("response.reasoning_summary_text.delta", '{"delta":""}'), 1.0)
    a.on_event(SSEEvent("response.output_text.delta", '{"delta":""}'), 1.5)
    assert a.obs.clock.count == 0
    a.on_event(SSEEvent("response.output_text.delta", '{"delta":"Hi"}'), 2.0)
    assert a.obs.clock.count == 1 and a.obs.output_text == ["Hi"]
