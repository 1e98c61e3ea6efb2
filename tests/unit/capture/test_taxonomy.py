"""The provider error taxonomy: HTTP and in-stream errors → error_type; retry waits in messages."""

from __future__ import annotations

import pytest

from llmtap.capture import taxonomy as errors


@pytest.mark.parametrize(
    ("status", "code", "type_", "message", "want"),
    [
        (429, "rate_limit_exceeded", "tokens", "Rate limit reached ... try again in 174ms", "rate_limited"),
        (
            429,
            "insufficient_quota",
            "insufficient_quota",
            "You exceeded your current quota",
            "quota_exhausted",
        ),
        (429, "", "insufficient_quota", "old style quota error", "quota_exhausted"),
        (529, "", "overloaded_error", "Overloaded", "overloaded"),
        (
            400,
            "",
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API.",
            "quota_exhausted",
        ),
        (
            400,
            "",
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            "context_length_exceeded",
        ),
        (
            400,
            "context_length_exceeded",
            "invalid_request_error",
            "This model's maximum context length is",
            "context_length_exceeded",
        ),
        (400, "", "invalid_request_error", "messages: field required", "bad_request"),
        (401, "invalid_api_key", "", "Incorrect API key", "auth"),
        (403, "", "permission_error", "", "auth"),
        (404, "model_not_found", "", "", "not_found"),
        (500, "", "api_error", "Internal server error", "server_error"),
        (504, "", "timeout_error", "", "timeout"),
        (402, "", "", "Insufficient credits", "quota_exhausted"),
        (0, "", "server_error", "The server had an error", "server_error"),
        (0, "server_is_overloaded", "", "", "overloaded"),
        (0, "", "overloaded_error", "Overloaded", "overloaded"),
        (0, "rate_limit_exceeded", "", "", "rate_limited"),
        (400, "content_filter", "", "The response was filtered", "content_filter"),
    ],
)
def test_error_taxonomy(status: int, code: str, type_: str, message: str, want: str) -> None:
    assert errors.classify(status, code, type_, message) == want


@pytest.mark.parametrize(
    ("message", "want"),
    [
        ("Please try again in 11.054s. Visit", 11.054),
        ("try again in 174ms", 0.174),
        ("Rate limit exceeded. Try again in 35 seconds.", 35.0),
        ("retry after 2 minutes", 120.0),
        ("nothing", None),
    ],
)
def test_retry_after_from_message(message: str, want: float | None) -> None:
    assert errors.retry_after_from_message(message) == (pytest.approx(want) if want is not None else None)


# -- errors in the body: the shapes providers use (adapters.base.error_from_body) --------------------

from llmtap.adapters.base import error_from_body  # noqa: E402


def test_in_stream_errors_are_classified_by_what_they_say() -> None:
    # Groq's in-stream error (tests/corpus/groq/tool_use_failed_stream.sse): type, code and status_code
    err = error_from_body(
        {
            "error": {
                "message": "Tool call validation failed",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
                "status_code": 400,
            }
        }
    )
    assert err is not None and (err.code, err.status) == ("tool_use_failed", 400)
    assert errors.classify(0, err.code, err.type, err.message, err.status) == "bad_request"
    # Anthropic's in-stream error names its type only: the type stands for its status
    assert errors.classify(0, "invalid_request_error", "invalid_request_error", "bad") == "bad_request"
    assert errors.classify(0, "rate_limit_error", "rate_limit_error", "") == "rate_limited"
    # ...but what the message says still wins over the status (credit balance is a quota)
    assert errors.classify(0, "invalid_request_error", "invalid_request_error", "Your credit balance is too low") == (
        "quota_exhausted"
    )
    # an error that says nothing of its class is a server error
    assert errors.classify(0, "", "", "something broke") == "server_error"


def test_error_code_is_the_type_when_there_is_no_code() -> None:
    anthropic = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    err = error_from_body(anthropic)
    assert err is not None and (err.code, err.type, err.message) == (
        "overloaded_error",
        "overloaded_error",
        "Overloaded",
    )
    openai = {"error": {"message": "m", "type": "invalid_request_error", "code": "unsupported_parameter"}}
    assert error_from_body(openai).code == "unsupported_parameter"  # type: ignore[union-attr]


def test_bare_message_bodies_of_http_errors() -> None:
    # Bedrock (tests/corpus/bedrock/error_400_message.json) and AWS JSON-protocol errors
    err = error_from_body({"message": "The provided model identifier is invalid."}, 400)
    assert err is not None and err.message == "The provided model identifier is invalid."
    err = error_from_body({"__type": "com.amazon.coral#ValidationException", "Message": "bad"}, 400)
    assert err is not None and (err.code, err.message) == ("ValidationException", "bad")
    assert error_from_body({"message": "hello"}) is None  # a 2xx body with a message is not an error


def test_google_retry_info_uses_the_duration_parser() -> None:
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34.4s"}],
        }
    }
    err = error_from_body(body)
    assert err is not None and (err.retry_after_s, err.status, err.code) == (34.4, 429, "429")
    body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "soon"}]  # type: ignore[index]
    assert error_from_body(body).retry_after_s is None  # type: ignore[union-attr]
