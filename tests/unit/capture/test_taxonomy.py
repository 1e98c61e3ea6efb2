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
