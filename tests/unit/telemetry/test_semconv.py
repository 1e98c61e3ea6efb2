"""The span contract: GenAI attribute names and the collector's stringification."""

from __future__ import annotations

import dataclasses

import pytest

from llmtap.record import COLUMN_NAMES, CallRecord
from llmtap.telemetry.semconv import SEMCONV, as_string, es6_number, span_attributes


def full_record(**kw: object) -> CallRecord:
    r = CallRecord(
        timestamp=1795950880.123456,
        trace_id="ab" * 16,
        span_id="cd" * 8,
        service="checkout",
        provider="openai",
        api="openai.chat_completions",
        operation="chat",
        server_address="api.openai.com",
        request_model="gpt-4o",
        response_model="gpt-4o-2024-08-06",
        request_id="req_1",
        response_id="chatcmpl-1",
        stream=True,
        status_code=200,
        outcome="error",
        error_type="rate_limited",
        error_code="rate_limit_exceeded",
        error_message="slow down ☃",
        mid_stream_error=True,
        finish_reason="error",
        finish_reason_raw="",
        input_tokens=2048,
        output_tokens=96,
        cache_read_tokens=1024,
        cache_write_tokens=12,
        reasoning_tokens=64,
        usage_source="provider",
        cost_usd=0.0123,
        input_cost_usd=0.01,
        output_cost_usd=0.0023,
        ttfb_ms=101.5,
        ttft_ms=250.25,
        duration_ms=1234.5,
        decode_ms=900.125,
        itl_p50_ms=10.5,
        itl_p95_ms=30.75,
        itl_max_ms=120.0,
        output_tokens_per_s=106.6,
        provider_processing_ms=42.0,
        content_events=80,
        tool_calls=2,
        max_output_tokens=4096,
        retry_after_s=11.054,
        ratelimit_remaining_requests=4999,
        ratelimit_remaining_tokens=-1,
        request_bytes=1000,
        response_bytes=20000,
        user_id="u",
        session_id="s",
        tenant="t",
        feature="f",
        prompt_version="v2",
        api_key_id="0123abcd",
        request_hash="ff" * 16,
    )
    return dataclasses.replace(r, **kw)  # type: ignore[arg-type]


def test_span_attributes_use_genai_names() -> None:
    attrs = span_attributes(full_record())
    for name in (
        "gen_ai.provider.name",
        "gen_ai.operation.name",
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.request.stream",
        "gen_ai.request.max_tokens",
        "gen_ai.response.time_to_first_chunk",
        "server.address",
        "error.type",
        "http.response.status_code",
    ):
        assert name in attrs, name
    assert attrs["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.25025)
    assert set(SEMCONV) <= set(COLUMN_NAMES)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (3, "3"),
        (1.0, "1"),
        (0.5, "0.5"),
        (1e-7, "1e-7"),
        (5e-5, "0.00005"),
        (1e21, "1e+21"),
        (123456789012.5, "123456789012.5"),
        (["stop"], '["stop"]'),
        ("x", "x"),
        (-2.25, "-2.25"),
    ],
)
def test_attribute_stringification_matches_the_collector(value: object, text: str) -> None:
    assert as_string(value) == text


def test_es6_numbers_round_trip() -> None:
    for f in (0.1 + 0.2, 1 / 3, 12345.678, 9.999e-7, 2.5e22):
        assert float(es6_number(f)) == f
