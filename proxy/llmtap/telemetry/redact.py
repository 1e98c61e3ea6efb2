"""Redaction of secrets (and e-mail addresses) from every free-text value llmtap keeps: the one module.

Used by the pipeline on each record before any sink sees it (:func:`redact_record`: error messages,
codes, provider fields echoed verbatim, attribution values, captured content, ratelimit headers),
by content capture (:func:`redact`), and by the log handler (:class:`RedactingFilter`) for every
log line. Shapes covered:

- provider keys by prefix (OpenAI ``sk-``/``sk-proj-``, Anthropic ``sk-ant-``, OpenRouter
  ``sk-or-``, Google ``AIza``, Groq ``gsk_``, xAI ``xai-``, Hugging Face ``hf_``, Replicate ``r8_``,
  Perplexity ``pplx-``, GitHub, Slack), JWTs, PEM private keys;
- AWS: access key ids (``AKIA``/``ASIA``...), SigV4 ``Credential=``/``Signature=`` (header and
  ``X-Amz-*`` query forms), session tokens, and secret access keys even unnamed (40 characters of
  base64 mixing cases and digits, in free text);
- other clouds and services: Azure storage and Service Bus keys (``AccountKey=``,
  ``SharedAccessKey=``), SAS signatures (``sig=``), Entra ID client secrets (``…8Q~…``); Google OAuth
  client secrets (``GOCSPX-``) and access tokens (``ya29.``); Alibaba ``LTAI``, DigitalOcean
  ``dop_v1_``, Stripe ``sk_live_``, GitLab ``glpat-``, npm ``npm_``, Vault ``hvs.``, SendGrid ``SG.``,
  Databricks ``dapi``; Slack and Discord webhook URLs (the host and path kept, the secret part not);
- connection URLs with a password, any scheme (``postgres://user:PASS@host``, ``mysql://``,
  ``redis://:PASS@``, ``amqp://``, ``mongodb+srv://``, ``clickhouse://``, ``https://user:PASS@``): the
  password goes, scheme, user and host stay;
- credentials by name: ``"api_key": "..."``, ``password=...``, ``Authorization: Basic ...``,
  ``client_secret``, ``access_token``, ... in JSON, query strings, headers and prose;
- bearer-like strings nobody named: 32+ characters of a token alphabet with high entropy and
  mixed character classes, and 32+ hex digits (Azure keys) — in free text only, never in ids.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections import Counter
from typing import Any

from ..record import SPAN_ONLY, CallRecord

MASK = "[REDACTED]"

# Distinctive shapes: safe on any text, ids and model names included.
_SHAPES = [
    re.compile(r"\bsk-(?:ant-|proj-|or-v1-|svcacct-|admin-)?[A-Za-z0-9_\-*]{8,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[0-9A-Z]{16}\b"),
    re.compile(r"\bgsk_[A-Za-z0-9]{20,}"),
    re.compile(r"\bxai-[A-Za-z0-9]{20,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),
    re.compile(r"\br8_[A-Za-z0-9]{20,}"),
    re.compile(r"\bpplx-[A-Za-z0-9]{20,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),
    re.compile(r"(?i)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S),
    re.compile(r"\bGOCSPX-[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\bya29\.[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\bLTAI[A-Za-z0-9]{12,20}\b"),
    re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
    re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"),
    re.compile(r"\bhvs\.[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bdapi[a-f0-9]{32}\b"),
    re.compile(r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_.\-]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"),
]
# Secrets inside URLs: the part before stays (scheme, user, host, path), the secret goes.
_URL_SECRETS = [
    # a password in the authority: postgres://user:PASS@host, redis://:PASS@host, https://user:PASS@host
    re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]{1,30}://[^\s/:@\"'<>]*:)(?!\[REDACTED\])([^\s/@\"'<>]+)(?=@)"),
    re.compile(r"(https://hooks\.slack\.com/(?:services|workflows|triggers)/)([A-Za-z0-9/_\-]+)"),
    re.compile(r"(https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/)([0-9]+/[A-Za-z0-9_\-]+)"),
]
# An AWS secret access key nobody named: 40 characters of base64 (free text only, as the heuristics below).
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[0-9])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])"
                         r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")  # fmt: skip
# Named credentials: the name stays, its value goes.
_NAMES = (
    r"(?:api[_-]?key|apikey|x-api-key|api-key|secret|secret[_-]?key|secret[_-]?access[_-]?key|client[_-]?secret|"
    r"password|passwd|pwd|token|access[_-]?token|refresh[_-]?token|id[_-]?token|auth[_-]?token|session[_-]?token|"
    r"security[_-]?token|private[_-]?key|authorization|proxy-authorization|credential|signature|"
    r"x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-api-key|account[_-]?key|"
    r"shared[_-]?access[_-]?key|sas[_-]?token|sig|key)"
)
_JSON_FIELD = re.compile(r'(?i)("' + _NAMES + r'"\s*:\s*")((?:[^"\\]|\\.){4,})(")')
# ... and the same JSON inside a JSON string (captured content is JSON that quotes the prompt's JSON)
_JSON_FIELD_ESCAPED = re.compile(r'(?i)(\\+"' + _NAMES + r'\\+"\s*:\s*\\+")(.{4,}?)(\\+")')
_ASSIGNED = re.compile(
    r"(?i)((?<![A-Za-z0-9])" + _NAMES + r"\b[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED\])([^\s\"',;&<>]{4,})"
)
_SCHEMES = re.compile(r"(?i)\b(bearer|basic|aws4-hmac-sha256)\s+(?!\[REDACTED\])([A-Za-z0-9._\-~+/=]{8,}=*)")
_SIGV4 = re.compile(r"(?i)\b(Credential|Signature|SignedHeaders)=([^\s,&\"']+)")
# Bearer-like strings nobody named.
_TOKENISH = re.compile(r"(?<![A-Za-z0-9_\-+/=.])[A-Za-z0-9_\-+/=.]{32,}(?![A-Za-z0-9_\-+/=.])")
_HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{32,}(?![0-9A-Za-z])")
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


_RUN = re.compile(r"[A-Za-z0-9]+")


def _bearer_like(m: re.Match[str]) -> str:
    """A token, not a name: one long unbroken run of mixed characters (model names and paths are
    short words joined by ``-``, ``.`` and ``/``)."""
    s = m.group(0)
    run = max((len(x) for x in _RUN.findall(s)), default=0)
    classes = sum(bool(re.search(p, s)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    if run >= 24 and classes >= 2 and _entropy(s) >= 3.5 and re.search(r"[0-9]", s):
        return MASK
    return s


@functools.lru_cache(maxsize=4096)  # model names, services, features: the same few values call after call
def redact_ids(text: str) -> str:
    """Distinctive shapes and named credentials, not the heuristics: for ids, model names and
    attribution values (a user id may well be 32 hex digits)."""
    if not text:
        return text
    for rx in _URL_SECRETS:
        text = rx.sub(lambda m: f"{m.group(1)}{MASK}", text)
    for rx in _SHAPES:
        text = rx.sub(MASK, text)
    text = _SIGV4.sub(lambda m: f"{m.group(1)}={MASK}", text)
    text = _JSON_FIELD.sub(lambda m: f"{m.group(1)}{MASK}{m.group(3)}", text)
    text = _JSON_FIELD_ESCAPED.sub(lambda m: f"{m.group(1)}{MASK}{m.group(3)}", text)
    text = _SCHEMES.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _ASSIGNED.sub(lambda m: f"{m.group(1)}{MASK}", text)


@functools.lru_cache(maxsize=1024)
def redact(text: str, emails: bool = True) -> str:
    """Every shape, for free text (error messages, content, log lines)."""
    if not text:
        return text
    text = redact_ids(text)
    text = _AWS_SECRET.sub(MASK, text)
    text = _HEX.sub(MASK, text)
    text = _TOKENISH.sub(_bearer_like, text)
    if emails:
        text = _EMAIL.sub("[EMAIL]", text)
    return text


_FREE_TEXT = ("error_message", "error_code", "finish_reason_raw")
_ID_LIKE = ("user_id", "session_id", "tenant", "feature", "prompt_version", "request_model", "response_model",
            "response_id", "request_id", "service")  # fmt: skip


def redact_record(r: CallRecord) -> None:
    """Redact the record's free-text fields in place, before any sink sees it."""
    for name in _FREE_TEXT:
        value = getattr(r, name, "")
        if isinstance(value, str) and value:
            setattr(r, name, redact(value))
    for name in _ID_LIKE:
        value = getattr(r, name, "")
        if isinstance(value, str) and value:
            setattr(r, name, redact_ids(value))
    headers = getattr(r, "ratelimit_headers", None)
    if isinstance(headers, dict):
        for k, v in list(headers.items()):
            if isinstance(v, str):
                headers[k] = redact(v, emails=False)
    for name in SPAN_ONLY:
        value = getattr(r, name)
        if isinstance(value, str) and value:
            setattr(r, name, redact(value))


class RedactingFilter(logging.Filter):
    """Every log line redacted (the message with its arguments, the exception text)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:
            return True
        clean = redact(msg, emails=False)
        if clean != msg:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            cleaned = redact(text, emails=False)
            if cleaned != text:
                record.exc_info = None
                record.exc_text = cleaned
        call: Any = getattr(record, "llm_call", None)
        if isinstance(call, dict):
            for k, v in call.items():
                if isinstance(v, str):
                    call[k] = redact_ids(v)
        return True
