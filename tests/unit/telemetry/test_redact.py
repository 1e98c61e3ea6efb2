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
