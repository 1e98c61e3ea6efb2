"""OpenAI Chat Completions adapter: the mock's streams, and recorded real responses (tests/corpus).

Expected values are read off the recordings by hand (the comment names the bytes) and the
contract (input includes cache, output includes reasoning), never from llmtap's output.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus import check, replay_row
from llmtap.testing import builders


def test_openai_usage_chunk_with_empty_choices_is_not_content() -> None:
    r = builders.mock_record(
        "/v1/chat/completions",
        {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}},
        "default",
    )
    assert r.content_events == 8 and r.usage_source == "provider" and (r.input_tokens, r.output_tokens) == (31, 8)


# -- recorded real responses ----------------------------------------------------------------------

OK = {"status_code": 200, "outcome": "ok", "error_type": "", "mid_stream_error": False}


def test_openai_stream_with_usage_reasoning_inside_completion() -> None:
    # openai/chat_stream_usage.sse: every delta is empty (reasoning is hidden), finish "length" at
    # max_completion_tokens=100; usage {prompt 12, completion 100, total 112, reasoning 100}: total =
    # prompt + completion, so reasoning is inside the completion count (OpenAI's convention).
    check(
        "openai/chat_stream_usage.sse",
        {
            **OK,
            "provider": "openai",
            "api": "openai.chat_completions",
            "request_model": "gpt-5-nano",
            "response_model": "gpt-5-nano-2025-08-07",
            "response_id": "chatcmpl-C4Hq5a6K3RaPMymUv70btQNYv6SvY",
            "stream": True,
            "finish_reason": "length",
            "finish_reason_raw": "length",
            "input_tokens": 12,
            "output_tokens": 100,
            "reasoning_tokens": 100,
            "cache_read_tokens": 0,
            "usage_source": "provider",
            "content_events": 0,
            "max_output_tokens": 100,
            "service_tier": "default",  # "service_tier":"default" on every chunk
            "request_id": "req_0b2a28d2d6414b5a94c1c7933cf7c1a6",  # x-request-id header
            "provider_processing_ms": 1207.0,  # openai-processing-ms header
        },
    )


def test_openai_stream_without_usage_is_estimated() -> None:
    # openai/chat_stream_no_usage.sse: no stream_options, so no usage chunk; 48 chunks carry
    # non-empty delta.content (the first is a role-only delta with content ""), then [DONE].
    r = check(
        "openai/chat_stream_no_usage.sse",
        {
            **OK,
            "stream": True,
            "finish_reason": "stop",
            "usage_source": "estimated",
            "content_events": 48,
            "service_tier": "default",
        },
    )
    assert r.output_tokens > 0 and r.reasoning_tokens == 0


def test_openai_tool_call_json() -> None:
    # openai/chat_tools.json: one tool_calls entry (get_current_weather), finish "tool_calls";
    # usage {prompt 162, completion 287 (reasoning 256 inside: total 449 = 162 + 287)}.
    check(
        "openai/chat_tools.json",
        {
            **OK,
            "stream": False,
            "tool_calls": 1,
            "finish_reason": "tool_calls",
            "finish_reason_raw": "tool_calls",
            "input_tokens": 162,
            "output_tokens": 287,
            "reasoning_tokens": 256,
            "content_events": 0,
        },
    )


def test_openai_moderation_chunk_is_not_content() -> None:
    # openai/chat_moderation_stream.sse: two chunks with text ("The capital of France is Paris.")
    # and a closing chunk carrying only moderation results; usage {13, 11}.
    check(
        "openai/chat_moderation_stream.sse",
        {**OK, "content_events": 2, "input_tokens": 13, "output_tokens": 11, "finish_reason": "stop"},
    )


def test_openai_400_error_body() -> None:
    # openai/chat_400_unsupported_parameter.json: 400 {"error":{"code":"unsupported_parameter",
    # "type":"invalid_request_error",...}}; the request did not ask for a stream.
    check(
        "openai/chat_400_unsupported_parameter.json",
        {
            "status_code": 400,
            "outcome": "error",
            "error_type": "bad_request",
            "error_code": "unsupported_parameter",
            "stream": False,
            "usage_source": "none",
            "finish_reason": "",
        },
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # xai/reasoning_outside_completion.json: usage {prompt 12, completion 1, total 241,
        # reasoning 228, cached 2}: 241 = 12 + 1 + 228, so reasoning is beside the completion count.
        (
            "xai/reasoning_outside_completion.json",
            {
                "provider": "x_ai",
                "input_tokens": 12,
                "output_tokens": 229,
                "reasoning_tokens": 228,
                "cache_read_tokens": 2,
            },
        ),
        # xai/reasoning_outside_completion_stream.sse: closing chunk usage {12, 1, total 303,
        # reasoning 290, cached 11}: 303 = 12 + 1 + 290. Five reasoning_content deltas + one content.
        (
            "xai/reasoning_outside_completion_stream.sse",
            {
                "provider": "x_ai",
                "stream": True,
                "input_tokens": 12,
                "output_tokens": 291,
                "reasoning_tokens": 290,
                "cache_read_tokens": 11,
                "content_events": 6,
                "usage_source": "provider",
            },
        ),
    ],
)
def test_xai_reasoning_outside_completion_is_added_to_output(name: str, expected: dict[str, Any]) -> None:
    check(name, {**OK, "finish_reason": "stop", "response_model": "grok-3-mini", **expected})


def test_output_with_reasoning_rules() -> None:
    from llmtap.adapters.base import output_with_reasoning

    # (completion, reasoning, prompt, total) -> (output, reasoning); see docs/how-it-works.md
    assert output_with_reasoning(100, 100, 12, 112) == (100, 100)  # OpenAI: total = prompt + completion
    assert output_with_reasoning(1, 228, 12, 241) == (229, 228)  # xAI: total = prompt + completion + reasoning
    assert output_with_reasoning(10, 11, 43, 53) == (10, 10)  # contradictory (OpenRouter): total wins, capped
    assert output_with_reasoning(5, 20, 3, None) == (25, 20)  # no total: reasoning > completion is exclusive
    assert output_with_reasoning(30, 20, 3, None) == (30, 20)  # no total: assume inclusive (OpenAI)
    assert output_with_reasoning(7, 0, 3, 99) == (7, 0)


def test_groq_in_stream_error_states_its_class() -> None:
    # groq/tool_use_failed_stream.sse: 93 reasoning deltas, then `event: error` with
    # {"type":"invalid_request_error","code":"tool_use_failed","status_code":400}: a bad request,
    # said by the error itself, not a server error. No usage report: output is estimated.
    r = check(
        "groq/tool_use_failed_stream.sse",
        {
            "provider": "groq",
            "status_code": 200,
            "outcome": "error",
            "mid_stream_error": True,
            "error_type": "bad_request",
            "error_code": "tool_use_failed",
            "finish_reason": "error",
            "content_events": 93,
            "usage_source": "estimated",
            "stream": True,
        },
    )
    assert r.error_message.startswith("Tool call validation failed")


def test_groq_usage_under_x_groq() -> None:
    # groq/tool_call_stream.sse: one tool_calls delta, finish "tool_calls", usage {210, 15}
    # (top level and under x_groq), total_time 0.057009128 s.
    check(
        "groq/tool_call_stream.sse",
        {
            **OK,
            "provider": "groq",
            "tool_calls": 1,
            "content_events": 1,
            "finish_reason": "tool_calls",
            "input_tokens": 210,
            "output_tokens": 15,
            "provider_processing_ms": pytest.approx(57.009128),
        },
    )


def test_groq_404_model_not_found() -> None:
    check(
        "groq/error_404_model_not_found.json",
        {"status_code": 404, "error_type": "not_found", "error_code": "model_not_found", "outcome": "error"},
    )


def test_deepseek_reasoning_content() -> None:
    # deepseek/thinking_stream.sse: 209 chunks with non-empty reasoning_content or content;
    # usage {prompt 6, completion 212, reasoning 198, total 218 = 6 + 212: inside}.
    check(
        "deepseek/thinking_stream.sse",
        {
            **OK,
            "provider": "deepseek",
            "content_events": 209,
            "input_tokens": 6,
            "output_tokens": 212,
            "reasoning_tokens": 198,
        },
    )
    # deepseek/reasoner_json.json: usage {18, 345, reasoning 315, total 363 = 18 + 345}, prompt_cache_hit 0
    check(
        "deepseek/reasoner_json.json",
        {**OK, "input_tokens": 18, "output_tokens": 345, "reasoning_tokens": 315, "cache_read_tokens": 0},
    )


def test_mistral_empty_thinking_block_is_not_content() -> None:
    # mistral/magistral_thinking_stream.sse: delta.content is a list of parts; one chunk carries
    # only [{"type":"thinking","thinking":[]}] (the end of the thinking section): 154 chunks carry
    # text, that one does not. usage {prompt 10, completion 232}: no reasoning count is reported.
    check(
        "mistral/magistral_thinking_stream.sse",
        {
            **OK,
            "provider": "mistral_ai",
            "content_events": 154,
            "input_tokens": 10,
            "output_tokens": 232,
            "reasoning_tokens": 0,
            "usage_source": "provider",
        },
    )


def test_openrouter_error_chunk_with_usage() -> None:
    # openrouter/stream_error_after_length.sse: ": OPENROUTER PROCESSING" comments, two reasoning
    # deltas (the second with finish_reason "length"), then a chunk with
    # "error":{"code":400,"message":"Token limit reached"} and usage {43, 10, total 53, reasoning 11,
    # cost 0}: the error states 400 (bad_request); its usage is the closing report; 53 = 43 + 10 says
    # reasoning is inside the completion, so reasoning is capped at 10 (docs/how-it-works.md).
    check(
        "openrouter/stream_error_after_length.sse",
        {
            "provider": "openrouter",
            "status_code": 200,
            "outcome": "error",
            "mid_stream_error": True,
            "error_type": "bad_request",
            "error_code": "400",
            "error_message": "Token limit reached",
            "finish_reason": "error",
            "finish_reason_raw": "length",
            "content_events": 2,
            "input_tokens": 43,
            "output_tokens": 10,
            "reasoning_tokens": 10,
            "usage_source": "provider",
            "cost_usd": 0.0,
            "cost_source": "provider",
        },
    )


def test_openrouter_provider_cost() -> None:
    # openrouter/reasoning_stream_cost.sse: usage {43, 36, reasoning 13, total 79, cost 0.000669}
    check(
        "openrouter/reasoning_stream_cost.sse",
        {
            **OK,
            "content_events": 5,
            "input_tokens": 43,
            "output_tokens": 36,
            "reasoning_tokens": 13,
            "cost_usd": 0.000669,
        },
    )
    # openrouter/error_429.json: {"error":{"code":429,"message":"Provider returned error",...}}
    check("openrouter/error_429.json", {"status_code": 429, "error_type": "rate_limited", "error_code": "429"})


def test_openrouter_finish_reason_error_is_kept_and_is_an_error() -> None:
    # OpenRouter's in-band failure: a choice with finish_reason "error" (and its error object).
    # No recording with a licence we could use shows it; this is the documented shape.
    from llmtap.adapters import OpenAIChat
    from llmtap.decode import SSEEvent

    a = OpenAIChat()
    a.on_event(SSEEvent("", '{"id":"gen-1","choices":[{"index":0,"delta":{"content":"Hi"}}]}'), 1.0)
    a.on_event(
        SSEEvent(
            "",
            '{"id":"gen-1","choices":[{"index":0,"delta":{"content":""},"finish_reason":"error",'
            '"native_finish_reason":"error","error":{"code":502,"message":"Upstream melted"}}]}',
        ),
        2.0,
    )
    assert a.obs.finish_raw == "error" and a.obs.finish == "error"
    assert a.obs.error is not None and (a.obs.error.message, a.obs.error.status) == ("Upstream melted", 502)
    assert a.obs.clock.count == 1


def test_azure_json_with_content_filter_results() -> None:
    # azure/chat_content_filter_results.json: content_filter_results on the choice and
    # prompt_filter_results beside it (annotations, not content); usage {14, 9}.
    check(
        "azure/chat_content_filter_results.json",
        {
            **OK,
            "provider": "azure.ai.openai",
            "request_model": "gpt-4o",
            "response_model": "gpt-4o-2024-11-20",
            "finish_reason": "stop",
            "input_tokens": 14,
            "output_tokens": 9,
        },
    )
    # azure/chat_cognitiveservices_reasoning.json: on *.cognitiveservices.azure.com, deployment
    # gpt-5-nano; usage {8, 271, reasoning 192, total 279 = 8 + 271}; apim-request-id and
    # x-request-id headers (x-request-id is looked up first).
    check(
        "azure/chat_cognitiveservices_reasoning.json",
        {
            **OK,
            "provider": "azure.ai.openai",
            "request_model": "gpt-5-nano",
            "input_tokens": 8,
            "output_tokens": 271,
            "reasoning_tokens": 192,
            "request_id": "c44b65e2-6f05-4899-abbe-9cfe79d74b26",
        },
    )


def test_azure_deployment_path_on_a_gateway_host() -> None:
    # The same recording behind an API-management gateway (--intercept): the path names Azure.
    r = replay_row("azure/chat_content_filter_results.json", host="apim.example.com")
    assert (r.provider, r.api, r.request_model) == ("azure.ai.openai", "openai.chat_completions", "gpt-4o")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_KEYS = st.sampled_from(["error", "object", "type", "message", "Message", "code", "status_code", "x"])
_VALUES = st.sampled_from(["error", "chat.completion.chunk", "", None, {}, {"message": "m"}, "boom", 429]) | _JSON


@pytest.mark.slow  # hundreds of examples: with the e2e suite, off the fast unit loop
@pytest.mark.e2e
@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=5))
def test_the_cheap_error_test_misses_no_error(obj: dict[str, Any]) -> None:
    """An event skips error_from_body only when error_from_body would find nothing in it."""
    from llmtap.adapters.base import error_from_body, may_carry_error

    if not may_carry_error(obj):
        assert error_from_body(obj) is None


def test_openai_stream_with_obfuscation_padding_every_delta_counted() -> None:
    # openai/chat_stream_obfuscation.sse: a role chunk (content ""), 300 chunks whose delta is {"content": "…"}
    # (none empty) each with another random "obfuscation" string, a finish chunk "stop", then the usage chunk
    # {prompt 16, completion 300, total 316}. The 300 text deltas are the content events (all but the first
    # are read from their bytes: adapters/deltas.py), the text is what they carry.
    r = check(
        "openai/chat_stream_obfuscation.sse",
        {
            **OK,
            "provider": "openai",
            "request_model": "gpt-4.1-nano",
            "response_model": "gpt-4.1-nano-2025-04-14",
            "response_id": "chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0",
            "finish_reason": "stop",
            "input_tokens": 16,
            "output_tokens": 300,
            "usage_source": "provider",
            "content_events": 300,
            "service_tier": "default",
        },
    )
    assert r.stream is True
