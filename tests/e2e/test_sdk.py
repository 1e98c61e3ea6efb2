"""End to end: official openai/anthropic SDKs → HTTPS_PROXY → a real `llmtap run` → mock provider (TLS).

Each call carries a unique x-llmtap-session header, so its llm_calls row is found
by session_id; rows are asserted field by field.
"""

from __future__ import annotations

import time
from typing import Any

import anthropic
import openai
import pytest
from genai_prices import Usage as GPUsage
from genai_prices import calc_price
from helpers import Sidecar, session_id

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

MESSAGES = [{"role": "user", "content": "Say something about foxes."}]


def oai() -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test-openai-0123456789", max_retries=0)


def ant() -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="sk-ant-test-0123456789", max_retries=0)


def hdrs(sid: str, scenario: str = "", **extra: str) -> dict[str, str]:
    h = {"x-llmtap-session": sid, **extra}
    if scenario:
        h["x-mock-scenario"] = scenario
    return h


def common_ok(row: dict[str, Any]) -> None:
    assert row["outcome"] == "ok"
    assert row["error_type"] == ""
    assert row["status_code"] == 200
    assert row["mid_stream_error"] is False
    assert row["trace_id"] and len(row["trace_id"]) == 32
    assert row["span_id"] and len(row["span_id"]) == 16
    assert row["api_key_id"] and "test" not in row["api_key_id"]
    assert row["request_hash"]
    assert row["request_bytes"] > 0 and row["response_bytes"] > 0
    assert row["duration_ms"] > 0
    assert row["ttfb_ms"] is not None and 0 < row["ttfb_ms"] <= row["duration_ms"]


def stream_asserts(row: dict[str, Any], events: int) -> None:
    assert row["stream"] is True
    assert row["content_events"] == events
    assert row["ttft_ms"] is not None and row["ttfb_ms"] <= row["ttft_ms"] <= row["duration_ms"]
    assert row["decode_ms"] is not None and row["decode_ms"] >= 0
    assert row["ttft_ms"] + row["decode_ms"] <= row["duration_ms"] + 0.001
    assert row["itl_p50_ms"] is not None and row["itl_p50_ms"] <= row["itl_p95_ms"] <= row["itl_max_ms"]


def test_chat_stream_with_usage_cached_and_reasoning(proxied: Sidecar) -> None:
    sid = session_id()
    stream = oai().chat.completions.create(
        model="gpt-4o",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=300,
        user="end-user-42",
        extra_headers=hdrs(sid, "cached_reasoning", **{"x-llmtap-feature": "summarize"}),
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text.startswith("The quick brown fox")
    row = proxied.row(sid)
    common_ok(row)
    stream_asserts(row, 8)
    assert (row["provider"], row["api"], row["operation"]) == ("openai", "openai.chat_completions", "chat")
    assert row["server_address"] == "api.openai.com"
    assert (row["request_model"], row["response_model"]) == ("gpt-4o", "gpt-4o-2024-08-06")
    assert row["response_id"] == "chatcmpl-mock123"
    assert row["request_id"] == "req_mock_openai_1"
    assert (row["finish_reason"], row["finish_reason_raw"]) == ("stop", "stop")
    assert (row["input_tokens"], row["output_tokens"]) == (2048, 96)
    assert (row["cache_read_tokens"], row["cache_write_tokens"], row["reasoning_tokens"]) == (1024, 0, 64)
    assert row["usage_source"] == "provider"
    assert row["max_output_tokens"] == 300
    assert row["provider_processing_ms"] == 42
    assert (row["ratelimit_remaining_requests"], row["ratelimit_remaining_tokens"]) == (4999, 159000)
    assert row["user_id"] == "end-user-42"
    assert row["feature"] == "summarize"
    assert row["output_tokens_per_s"] == pytest.approx(96 / (row["decode_ms"] / 1000.0))
    want = calc_price(
        GPUsage(input_tokens=2048, cache_read_tokens=1024, output_tokens=96),
        model_ref="gpt-4o-2024-08-06",
        provider_id="openai",
    )
    assert row["cost_usd"] == pytest.approx(float(want.total_price))
    assert row["input_cost_usd"] == pytest.approx(float(want.input_price))
    assert row["output_cost_usd"] == pytest.approx(float(want.output_price))


def test_chat_stream_without_usage_is_estimated(proxied: Sidecar) -> None:
    sid = session_id()
    stream = oai().chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True, extra_headers=hdrs(sid))
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    row = proxied.row(sid)
    common_ok(row)
    stream_asserts(row, 8)
    assert row["usage_source"] == "estimated"
    # The heuristic (offline) or tiktoken: either way within a sane band of the text seen.
    assert 1 <= row["output_tokens"] <= len(text.encode())
    assert 1 <= row["input_tokens"] <= len(MESSAGES[0]["content"].encode())


def test_chat_non_stream(proxied: Sidecar) -> None:
    sid = session_id()
    r = oai().chat.completions.create(model="gpt-4o", messages=MESSAGES, extra_headers=hdrs(sid, "tool_calls"))
    assert r.choices[0].message.tool_calls
    row = proxied.row(sid)
    common_ok(row)
    assert row["stream"] is False
    assert row["ttft_ms"] is None and row["decode_ms"] is None and row["itl_p50_ms"] is None
    assert row["content_events"] == 0
    assert (row["finish_reason"], row["finish_reason_raw"]) == ("tool_calls", "tool_calls")
    assert row["tool_calls"] == 1
    assert (row["input_tokens"], row["output_tokens"], row["usage_source"]) == (31, 8, "provider")


def test_chat_stream_tool_calls(proxied: Sidecar) -> None:
    sid = session_id()
    stream = oai().chat.completions.create(
        model="gpt-4o",
        messages=MESSAGES,
        stream=True,
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
        extra_headers=hdrs(sid, "tool_calls"),
    )
    list(stream)
    row = proxied.row(sid)
    stream_asserts(row, 3)  # the call header and two argument deltas; the role chunk is not content
    assert (row["finish_reason"], row["tool_calls"]) == ("tool_calls", 1)


def test_responses_stream(proxied: Sidecar) -> None:
    sid = session_id()
    events = list(
        oai().responses.create(model="gpt-4.1", input="hi", stream=True, max_output_tokens=500, extra_headers=hdrs(sid))
    )
    assert events[-1].type == "response.completed"
    row = proxied.row(sid)
    common_ok(row)
    stream_asserts(row, 6)
    assert (row["api"], row["operation"]) == ("openai.responses", "chat")
    assert (row["response_model"], row["response_id"]) == ("gpt-4.1-2025-04-14", "resp_mock456")
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_tokens"], row["reasoning_tokens"]) == (
        12033,
        44,
        11904,
        12,
    )
    assert (row["finish_reason"], row["finish_reason_raw"]) == ("stop", "completed")
    assert row["max_output_tokens"] == 500


def test_responses_stream_helper_and_structured_output(proxied: Sidecar) -> None:
    """The SDK's own accumulators: ``responses.stream()`` builds the answer from the item and content-part events
    (it raised IndexError on a stream without them), ``responses.parse()`` validates JSON against the model."""
    from typing import Literal

    import pydantic

    sid = session_id()
    with oai().responses.stream(model="gpt-4.1", input="hi", extra_headers=hdrs(sid)) as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert deltas and final.output_text == deltas and final.status == "completed"
    assert proxied.row(sid)["outcome"] == "ok"

    class Triage(pydantic.BaseModel):
        label: Literal["bug", "feature"]
        confidence: float
        tags: list[str]

    sid = session_id()
    parsed = oai().responses.parse(model="gpt-4.1", input="triage", text_format=Triage, extra_headers=hdrs(sid))
    assert isinstance(parsed.output_parsed, Triage)
    assert proxied.row(sid)["outcome"] == "ok"


def test_responses_failed_rate_limit(proxied: Sidecar) -> None:
    sid = session_id()
    events = list(
        oai().responses.create(model="gpt-4.1", input="hi", stream=True, extra_headers=hdrs(sid, "failed_rate_limit"))
    )
    assert events[-1].type == "response.failed"
    row = proxied.row(sid)
    assert (row["status_code"], row["outcome"], row["error_type"]) == (200, "error", "rate_limited")
    assert row["mid_stream_error"] is True
    assert row["finish_reason"] == "error"
    assert row["error_code"] == "rate_limit_exceeded"
    assert "Rate limit reached" in row["error_message"]
    assert row["retry_after_s"] == pytest.approx(11.054)
    assert row["content_events"] == 0 and row["ttft_ms"] is None


def test_openai_mid_stream_error(proxied: Sidecar) -> None:
    sid = session_id()
    with pytest.raises(openai.APIError):
        list(
            oai().chat.completions.create(
                model="gpt-4o", messages=MESSAGES, stream=True, extra_headers=hdrs(sid, "mid_stream_error")
            )
        )
    row = proxied.row(sid)
    assert (row["status_code"], row["outcome"], row["error_type"]) == (200, "error", "server_error")
    assert row["mid_stream_error"] is True
    assert (row["finish_reason"], row["finish_reason_raw"]) == ("error", "")
    assert row["error_message"].startswith("The server had an error")
    assert row["content_events"] == 3
    assert row["usage_source"] == "estimated" and row["output_tokens"] > 0


@pytest.mark.parametrize(
    ("scenario", "error_type", "code"),
    [
        ("rate_limit_429", "rate_limited", "rate_limit_exceeded"),
        ("quota_429", "quota_exhausted", "insufficient_quota"),
    ],
)
def test_openai_429_rate_limit_vs_quota(proxied: Sidecar, scenario: str, error_type: str, code: str) -> None:
    sid = session_id()
    with pytest.raises(openai.RateLimitError):
        oai().chat.completions.create(model="gpt-4o", messages=MESSAGES, extra_headers=hdrs(sid, scenario))
    row = proxied.row(sid)
    assert (row["status_code"], row["outcome"], row["error_type"], row["error_code"]) == (
        429,
        "error",
        error_type,
        code,
    )
    assert row["mid_stream_error"] is False
    assert row["usage_source"] == "none" and row["input_tokens"] == 0
    if scenario == "rate_limit_429":
        assert row["retry_after_s"] == pytest.approx(1.5)  # retry-after-ms header
        assert row["ratelimit_remaining_tokens"] == 0
    else:
        assert row["retry_after_s"] is None


def test_anthropic_stream_cache_tokens_and_pings(proxied: Sidecar) -> None:
    sid = session_id()
    with ant().messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        messages=MESSAGES,
        metadata={"user_id": "acct-7"},
        extra_headers=hdrs(sid),
    ) as s:
        text = s.get_final_text()
    assert text.startswith("The quick")
    row = proxied.row(sid)
    common_ok(row)
    stream_asserts(row, 7)  # pings and the empty content_block_start are not content
    assert (row["provider"], row["api"], row["server_address"]) == (
        "anthropic",
        "anthropic.messages",
        "api.anthropic.com",
    )
    assert (row["request_model"], row["response_model"]) == (
        "claude-sonnet-4-5",
        "claude-sonnet-4-5-20250929",
    )
    assert row["response_id"] == "msg_mock01" and row["request_id"] == "req_mock_anthropic_1"
    assert row["input_tokens"] == 28 + 1200 + 3400  # inclusive of cache reads and writes
    assert (row["cache_read_tokens"], row["cache_write_tokens"], row["output_tokens"]) == (3400, 1200, 7)
    assert (row["finish_reason"], row["finish_reason_raw"]) == ("stop", "end_turn")
    assert row["max_output_tokens"] == 1024
    assert row["user_id"] == "acct-7"
    assert (row["ratelimit_remaining_requests"], row["ratelimit_remaining_tokens"]) == (49, 39000)
    want = calc_price(
        GPUsage(input_tokens=4628, cache_read_tokens=3400, cache_write_tokens=1200, output_tokens=7),
        model_ref="claude-sonnet-4-5-20250929",
        provider_id="anthropic",
    )
    assert row["cost_usd"] == pytest.approx(float(want.total_price))
    assert row["input_cost_usd"] == pytest.approx(float(want.input_price))


def test_anthropic_non_stream(proxied: Sidecar) -> None:
    sid = session_id()
    msg = ant().messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=MESSAGES, extra_headers=hdrs(sid))
    assert msg.usage.output_tokens == 7
    row = proxied.row(sid)
    common_ok(row)
    assert row["stream"] is False
    assert (row["input_tokens"], row["output_tokens"], row["finish_reason"]) == (4628, 7, "stop")


def test_anthropic_mid_stream_overloaded(proxied: Sidecar) -> None:
    sid = session_id()
    with (
        pytest.raises(anthropic.APIStatusError),
        ant().messages.stream(
            model="claude-sonnet-4-5",
            max_tokens=64,
            messages=MESSAGES,
            extra_headers=hdrs(sid, "overloaded_mid_stream"),
        ) as s,
    ):
        s.get_final_text()
    row = proxied.row(sid)
    assert (row["status_code"], row["outcome"], row["error_type"]) == (200, "error", "overloaded")
    assert row["mid_stream_error"] is True
    # Anthropic's only code is error.type: kept verbatim
    assert (row["finish_reason"], row["error_code"], row["error_message"]) == (
        "error",
        "overloaded_error",
        "Overloaded",
    )
    assert row["content_events"] == 3
    # message_start's input is the provider's, its output count a placeholder: the output is estimated
    # from what was seen, so the usage is partial (the contract's usage_source = partial)
    assert row["usage_source"] == "partial" and row["output_tokens"] >= 3
    assert row["input_tokens"] == 4628


def test_anthropic_529_overloaded(proxied: Sidecar) -> None:
    sid = session_id()
    with pytest.raises(anthropic.APIStatusError) as ei:
        ant().messages.create(
            model="claude-sonnet-4-5",
            max_tokens=64,
            messages=MESSAGES,
            extra_headers=hdrs(sid, "overloaded_529"),
        )
    assert ei.value.status_code == 529
    row = proxied.row(sid)
    assert (row["status_code"], row["outcome"], row["error_type"]) == (529, "error", "overloaded")
    assert row["mid_stream_error"] is False and row["request_id"] == "req_mock_529"


def test_anthropic_credit_balance_400_is_quota(proxied: Sidecar) -> None:
    sid = session_id()
    with pytest.raises(anthropic.BadRequestError):
        ant().messages.create(
            model="claude-sonnet-4-5", max_tokens=64, messages=MESSAGES, extra_headers=hdrs(sid, "credit_low")
        )
    row = proxied.row(sid)
    assert (row["status_code"], row["error_type"], row["error_code"]) == (
        400,
        "quota_exhausted",
        "invalid_request_error",
    )


def test_client_cancel(proxied: Sidecar) -> None:
    sid = session_id()
    stream = oai().chat.completions.create(
        model="gpt-4o",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=hdrs(sid, "slow"),
    )
    it = iter(stream)
    seen = [next(it) for _ in range(3)]  # role chunk + two words
    assert seen[1].choices[0].delta.content
    stream.close()
    row = proxied.row(sid)
    assert (row["outcome"], row["finish_reason"], row["error_type"]) == ("cancelled", "cancelled", "")
    assert row["status_code"] == 200 and row["mid_stream_error"] is False
    assert 2 <= row["content_events"] < 8
    assert row["usage_source"] == "estimated" and row["output_tokens"] >= 1
    assert row["duration_ms"] < 8 * 200  # recorded when the client left, not when the stream would have ended


def test_upstream_disconnect(proxied: Sidecar) -> None:
    sid = session_id()
    with pytest.raises(openai.APIError):
        list(
            oai().chat.completions.create(
                model="gpt-4o", messages=MESSAGES, stream=True, extra_headers=hdrs(sid, "disconnect")
            )
        )
    row = proxied.row(sid)
    assert (row["outcome"], row["error_type"]) == ("error", "upstream_disconnected")
    assert row["content_events"] == 3


@pytest.mark.parametrize("scenario", ["gzip", "crlf", "split_utf8"])
def test_wire_variants(proxied: Sidecar, scenario: str) -> None:
    sid = session_id()
    stream = oai().chat.completions.create(
        model="gpt-4o",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=hdrs(sid, scenario),
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert "naïve" in text or "The quick" in text
    row = proxied.row(sid)
    common_ok(row)
    stream_asserts(row, 8)
    assert (row["input_tokens"], row["output_tokens"], row["usage_source"]) == (31, 8, "provider")
    assert row["finish_reason"] == "stop"


def test_completions_stream(proxied: Sidecar) -> None:
    sid = session_id()
    list(
        oai().completions.create(
            model="gpt-3.5-turbo-instruct", prompt="Once", stream=True, max_tokens=5, extra_headers=hdrs(sid)
        )
    )
    row = proxied.row(sid)
    common_ok(row)
    stream_asserts(row, 5)
    assert (row["api"], row["operation"], row["finish_reason"]) == (
        "openai.completions",
        "text_completion",
        "length",
    )
    assert row["usage_source"] == "estimated"


def test_embeddings(proxied: Sidecar) -> None:
    sid = session_id()
    r = oai().embeddings.create(model="text-embedding-3-small", input=["a", "b"], extra_headers=hdrs(sid))
    assert len(r.data) == 2
    row = proxied.row(sid)
    common_ok(row)
    assert (row["api"], row["operation"], row["stream"]) == ("openai.embeddings", "embeddings", False)
    assert (row["input_tokens"], row["output_tokens"], row["usage_source"]) == (16, 0, "provider")
    assert row["finish_reason"] == ""


def test_call_is_queryable_within_two_seconds(proxied: Sidecar) -> None:
    sid = session_id()
    oai().embeddings.create(model="text-embedding-3-small", input="x", extra_headers=hdrs(sid))
    t0 = time.monotonic()
    rows = proxied.rows(f"session_id = '{sid}'", 1, timeout=2.0)
    assert len(rows) == 1, f"not queryable after {time.monotonic() - t0:.2f}s"


def test_attribution_headers_are_stripped_before_upstream(proxied: Sidecar, mock: Any) -> None:
    sid = session_id()
    oai().embeddings.create(
        model="text-embedding-3-small",
        input="x",
        extra_headers=hdrs(sid, **{"x-llmtap-user": "u1", "x-llmtap-tenant": "t1", "x-llmtap-prompt-version": "v3"}),
    )
    row = proxied.row(sid)
    assert (row["user_id"], row["tenant"], row["prompt_version"]) == ("u1", "t1", "v3")
    seen = [r for r in mock.requests() if r["path"].endswith("/embeddings")]
    assert seen and all(not k.startswith("x-llmtap-") for r in seen for k in r["headers"])


def test_unknown_model_has_null_cost(proxied: Sidecar) -> None:
    sid = session_id()
    oai().chat.completions.create(model="acme-llm-9000", messages=MESSAGES, extra_headers=hdrs(sid))
    row = proxied.row(sid)
    assert row["usage_source"] == "provider" and row["input_tokens"] == 31
    assert row["cost_usd"] is None and row["input_cost_usd"] is None and row["output_cost_usd"] is None


def test_http_error_has_null_cost(proxied: Sidecar) -> None:
    sid = session_id()
    with pytest.raises(openai.RateLimitError):
        oai().chat.completions.create(model="gpt-4o", messages=MESSAGES, extra_headers=hdrs(sid, "quota_429"))
    assert proxied.row(sid)["cost_usd"] is None
