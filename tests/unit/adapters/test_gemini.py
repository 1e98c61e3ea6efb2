"""Gemini / Vertex AI generateContent on recorded real responses (tests/corpus)."""

from __future__ import annotations

from corpus import check, replay_row

OK = {"status_code": 200, "outcome": "ok", "error_type": ""}


def test_sse_stream() -> None:
    # gemini/stream_sse.sse (alt=sse, CRLF-framed): three chunks with text ("The", " capital of
    # France", " is Paris.\n"), the last with finishReason STOP and usage {prompt 13, candidates 8}.
    check(
        "gemini/stream_sse.sse",
        {
            **OK,
            "provider": "gcp.gemini",
            "api": "gemini.generate_content",
            "request_model": "gemini-2.0-flash-exp",
            "response_model": "gemini-2.0-flash-exp",
            "response_id": "w1peaMz6INOvnvgPgYfPiQY",
            "stream": True,
            "content_events": 3,
            "finish_reason": "stop",
            "finish_reason_raw": "STOP",
            "input_tokens": 13,
            "output_tokens": 8,
        },
    )


def test_streamed_json_array_with_thoughts() -> None:
    # gemini/reasoning_json_array.json (streamGenerateContent without alt=sse): three elements, two
    # with text, the last (text "" + thoughtSignature) with STOP; its usage {prompt 9, candidates 29,
    # thoughts 256}: output = 29 + 256, thoughts are reasoning.
    check(
        "gemini/reasoning_json_array.json",
        {**OK, "stream": True, "content_events": 2, "input_tokens": 9, "output_tokens": 285, "reasoning_tokens": 256},
    )


def test_thoughts_json_and_function_calls() -> None:
    # gemini/thoughts_json.json: usage {prompt 15, candidates 8, thoughts 275}; modelVersion "models/gemini-2.5-pro"
    check(
        "gemini/thoughts_json.json",
        {
            **OK,
            "stream": False,
            "response_model": "models/gemini-2.5-pro",
            "output_tokens": 283,
            "reasoning_tokens": 275,
        },
    )
    # gemini/function_call_json.json: one functionCall part, finishReason STOP → tool_calls
    check(
        "gemini/function_call_json.json",
        {**OK, "tool_calls": 1, "finish_reason": "tool_calls", "finish_reason_raw": "STOP", "input_tokens": 33},
    )
    # gemini/function_call_stream.sse: a functionCall chunk, then text "" with STOP; usage
    # {prompt 29, candidates 15, thoughts 45}
    check(
        "gemini/function_call_stream.sse",
        {
            **OK,
            "tool_calls": 1,
            "content_events": 1,
            "finish_reason": "tool_calls",
            "output_tokens": 60,
            "reasoning_tokens": 45,
        },
    )


def test_429_retry_info_and_quota_class() -> None:
    # gemini/error_429_retry_info.json: RESOURCE_EXHAUSTED with a QuotaFailure naming
    # "GenerateRequestsPerMinutePerProjectPerModel-FreeTier" (a per-minute quota: rate limit) and a
    # RetryInfo {"retryDelay": "34.4s"}.
    check(
        "gemini/error_429_retry_info.json",
        {
            "status_code": 429,
            "outcome": "error",
            "error_type": "rate_limited",
            "error_code": "429",
            "retry_after_s": 34.4,
        },
    )


def test_error_to_a_stream_request_says_stream() -> None:
    # The same 429 answering :streamGenerateContent: the request asked for a stream.
    r = replay_row(
        "gemini/error_429_retry_info.json", path="/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    )
    assert (r.stream, r.status_code, r.error_type) == (True, 429, "rate_limited")


def test_vertex_flex_stream() -> None:
    # vertex/flex_stream_thoughts.sse: one chunk "OK" with STOP; usage {prompt 5, candidates 1,
    # thoughts 100, trafficType ON_DEMAND_FLEX}.
    check(
        "vertex/flex_stream_thoughts.sse",
        {
            **OK,
            "provider": "gcp.vertex_ai",
            "request_model": "gemini-3-flash-preview",
            "content_events": 1,
            "input_tokens": 5,
            "output_tokens": 101,
            "reasoning_tokens": 100,
        },
    )


def test_vertex_path_on_a_proxy_host() -> None:
    r = replay_row("vertex/flex_stream_thoughts.sse", host="vertex-proxy.example.com")
    assert (r.provider, r.request_model, r.output_tokens) == ("gcp.vertex_ai", "gemini-3-flash-preview", 101)


def test_vertex_numeric_enums_are_read_as_their_names() -> None:
    # vertex/json_enum_int.json (Vertex REST with enum-encoding=int): one candidate "This is a test." with
    # "finishReason": 1 (STOP in Candidate.FinishReason of the API reference); usage {prompt 5, candidates 5,
    # thoughts 294}: output = 5 + 294; modelVersion gemini-2.5-pro, responseId T5akaImrHM2Dm9IPlu_Z0QI.
    check(
        "vertex/json_enum_int.json",
        {
            **OK,
            "provider": "gcp.vertex_ai",
            "request_model": "gemini-2.5-pro",
            "response_model": "gemini-2.5-pro",
            "response_id": "T5akaImrHM2Dm9IPlu_Z0QI",
            "stream": False,
            "finish_reason": "stop",
            "finish_reason_raw": "STOP",
            "input_tokens": 5,
            "output_tokens": 299,
            "reasoning_tokens": 294,
        },
    )


def test_gemini_service_tier_is_the_one_that_served() -> None:
    # gemini/stream_thoughts_service_tier.sse: every chunk's usageMetadata has "serviceTier": "standard"; the last
    # {prompt 11, candidates 703, thoughts 713}, finishReason STOP; the request asked for no tier.
    r = check(
        "gemini/stream_thoughts_service_tier.sse",
        {
            **OK,
            "stream": True,
            "finish_reason": "stop",
            "input_tokens": 11,
            "output_tokens": 1416,
            "reasoning_tokens": 713,
            "service_tier": "standard",
            "request_service_tier": "",
        },
    )
    assert r.response_id == "iCUhao2zJ-LHjuMP1vvH2Qk"
