"""Redaction of secrets from what llmtap keeps."""

from __future__ import annotations

import pytest

from llmtap.telemetry.redact import redact


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("Incorrect API key provided: sk-proj-abc123def456ghi789", "sk-proj-abc123def456ghi789"),
        ("key sk-ant-api03-AAAAAAAAAAAAAAAAAAAA here", "sk-ant-api03-AAAAAAAAAAAAAAAAAAAA"),
        ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
        ("Authorization: Bearer abcdefghijklmnop", "abcdefghijklmnop"),
        ("password=hunter22secret", "hunter22secret"),
        ("contact jane.doe@example.org now", "jane.doe@example.org"),
        ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ],
)
def test_redaction(text: str, gone: str) -> None:
    out = redact(text)
    assert gone not in out and ("[REDACTED]" in out or "[EMAIL]" in out)


from secrets_corpus import SHAPES, TEXT  # noqa: E402


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_secret_shape_is_redacted_in_free_text(shape: str) -> None:
    out = redact(TEXT)
    assert SHAPES[shape] not in out, shape
    assert SHAPES[shape][4:20] not in out, shape  # nor a recognizable piece of it


@pytest.mark.parametrize(
    "text",
    [
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000.",
        "accounts/fireworks/models/llama-v3p1-405b-instruct",
        "anthropic.claude-3-5-sonnet-20241022-v2:0",
        "The model `gpt-4o-mini-2024-07-18` does not exist or you do not have access to it.",
        "max_tokens: 4096 exceeds the limit of 1024 for this token type",
    ],
)
def test_ordinary_provider_text_is_kept(text: str) -> None:
    assert redact(text) == text


def test_records_and_log_lines_are_redacted() -> None:
    import logging

    from llmtap.record import CallRecord
    from llmtap.telemetry.redact import RedactingFilter, redact_record

    r = CallRecord(error_message=TEXT, error_code=SHAPES["openai project"], user_id=SHAPES["anthropic"])
    r.request_model = "gpt-4o"
    r.parse_error = f"ValueError: {SHAPES['groq']}"
    redact_record(r)
    dump = repr(r)
    assert not any(v in dump for v in SHAPES.values())
    assert r.request_model == "gpt-4o"
    rec = logging.LogRecord("x", logging.WARNING, __file__, 1, "upstream said %s", (TEXT,), None)
    RedactingFilter().filter(rec)
    assert not any(v in rec.getMessage() for v in SHAPES.values())
