"""Redaction of secrets (and e-mail addresses) from text that llmtap keeps.

Used on provider error messages (OpenAI echoes a masked key in "Incorrect API key
provided: sk-ab***") and on captured content.
"""

from __future__ import annotations

import re

from ..record import CallRecord

_PATTERNS = [
    re.compile(r"\bsk-(?:ant-|proj-|or-v1-)?[A-Za-z0-9_\-*]{8,}"),  # OpenAI, Anthropic, OpenRouter
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),  # Google API keys
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\bgsk_[A-Za-z0-9]{20,}"),  # Groq
    re.compile(r"\bxai-[A-Za-z0-9]{20,}"),  # xAI
    re.compile(r"\b(?:ghp|gho|ghu|ghs|github_pat)_[A-Za-z0-9_]{20,}"),  # GitHub tokens
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack
    re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),  # JWTs
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-~+/]{8,}=*"),
    re.compile(r"(?i)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"(?i)\b(api[_-]?key|secret|password|passwd|token)\b(\s*[:=]\s*)[\"']?[^\s\"',;]{6,}"),
]
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")
MASK = "[REDACTED]"


def redact(text: str, emails: bool = True) -> str:
    if not text:
        return text
    for rx in _PATTERNS[:-1]:
        text = rx.sub(MASK, text)
    text = _PATTERNS[-1].sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    if emails:
        text = _EMAIL.sub("[EMAIL]", text)
    return text


def redact_record(r: CallRecord) -> None:
    """Redact the record's free-text fields in place, before any sink sees it."""
    if r.error_message:
        r.error_message = redact(r.error_message)
    pe = r.extra.get("parse_error")
    if isinstance(pe, str):
        r.extra["parse_error"] = redact(pe)
