"""AWS Bedrock Converse / InvokeModel on recorded real responses, binary event-stream included."""

from __future__ import annotations

from corpus import check

OK = {"status_code": 200, "outcome": "ok", "error_type": "", "provider": "aws.bedrock"}


def test_converse_stream_event_stream() -> None:
    # bedrock/converse_stream.bin: 33 event-stream messages: messageStart, 29 contentBlockDelta with
    # text, contentBlockStop, messageStop end_turn, metadata {usage {13, 82}, latencyMs 522}.
    check(
        "bedrock/converse_stream.bin",
        {
            **OK,
            "api": "bedrock.converse",
            "request_model": "us.amazon.nova-micro-v1:0",
            "stream": True,
            "content_events": 29,
            "finish_reason": "stop",
            "finish_reason_raw": "end_turn",
            "input_tokens": 13,
            "output_tokens": 82,
            "provider_processing_ms": 522.0,
        },
    )


def test_converse_stream_empty_text_delta() -> None:
    # bedrock/converse_stream_empty_delta.bin: a delta with text "" (not content), one
    # reasoningContent delta, two text deltas; usage {70, 43} (Converse reports no reasoning count).
    check(
        "bedrock/converse_stream_empty_delta.bin",
        {**OK, "content_events": 3, "input_tokens": 70, "output_tokens": 43, "reasoning_tokens": 0},
    )


def test_converse_json() -> None:
    # bedrock/converse.json: usage {inputTokens 21, outputTokens 69, cacheRead 0, cacheWrite 0}, latencyMs 2910
    check(
        "bedrock/converse.json",
        {
            **OK,
            "stream": False,
            "input_tokens": 21,
            "output_tokens": 69,
            "finish_reason": "stop",
            "provider_processing_ms": 2910.0,
        },
    )


def test_invoke_anthropic_with_cache() -> None:
    # bedrock/invoke_anthropic_cache.json: Anthropic's body on InvokeModel: usage {input 3,
    # cache_read 9511, cache_creation 1956 (5m 1956, 1h 0), output 44}.
    check(
        "bedrock/invoke_anthropic_cache.json",
        {
            **OK,
            "api": "bedrock.invoke",
            "response_id": "msg_bdrk_01PwGjqAJE4R8ZBE8KCtMEjG",
            "input_tokens": 3 + 9511 + 1956,
            "cache_read_tokens": 9511,
            "cache_write_tokens": 1956,
            "cache_write_1h_tokens": 0,
            "output_tokens": 44,
        },
    )


def test_invoke_with_response_stream() -> None:
    # bedrock/invoke_stream_anthropic.bin: 10 `chunk` messages whose base64 `bytes` are Anthropic
    # events: message_start (model claude-sonnet-4-5-20250929, input 10), 5 text_delta, message_delta
    # end_turn output 15, message_stop with amazon-bedrock-invocationMetrics {10, 15}.
    check(
        "bedrock/invoke_stream_anthropic.bin",
        {
            **OK,
            "api": "bedrock.invoke",
            "stream": True,
            "response_model": "claude-sonnet-4-5-20250929",
            "content_events": 5,
            "input_tokens": 10,
            "output_tokens": 15,
            "finish_reason": "stop",
        },
    )


def test_message_only_error_body_keeps_its_message() -> None:
    # bedrock/error_400_message.json: 400 {"message": "The provided model identifier is invalid."}
    # answering converse-stream: the request asked for a stream.
    check(
        "bedrock/error_400_message.json",
        {
            "status_code": 400,
            "outcome": "error",
            "error_type": "bad_request",
            "error_message": "The provided model identifier is invalid.",
            "stream": True,
            "usage_source": "none",
        },
    )
