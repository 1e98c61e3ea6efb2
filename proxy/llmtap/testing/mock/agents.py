"""What the coding agents' endpoints add to the API they speak: envelopes and headers.

The mock answers an agent's request with the reply of the wire API it speaks (the Responses
API for Codex, Messages for Claude Code, generateContent for Gemini CLI, Chat Completions for
Copilot), then :func:`decorate` dresses it as that endpoint does:

- Claude Code with a plan credential (``Authorization: Bearer sk-ant-oat…``): the plan-window
  headers ``anthropic-ratelimit-unified-*`` (5-hour and 7-day utilisation, status, reset,
  representative claim, fallback percentage, overage status) and ``anthropic-organization-id``;
  a request whose ``cache_control`` asks for ``"ttl": "1h"`` gets its cache write reported as
  ``cache_creation.ephemeral_1h_input_tokens``, as the API does.
- ChatGPT-plan Codex (``chatgpt.com/backend-api/codex/responses``): the plan-window headers
  Codex reads, ``x-codex-primary-*`` / ``x-codex-secondary-*``.
- Gemini Code Assist (``cloudcode-pa.googleapis.com/v1internal:…``): every response object
  wrapped as ``{"response": …, "traceId": …}``; the model is the body's.
- GitHub Copilot (``api.githubcopilot.com``): its request-id header.

Shapes: the CC wire reference of 42 Claude Code 2.1.126 captures (the unified headers), codex-rs
tests (``x-codex-*``), gemini-cli ``code_assist/converter.ts`` (the envelope).
"""

from __future__ import annotations

import json
from typing import Any

from .common import Reply

UNIFIED_HEADERS = [
    ("anthropic-organization-id", "4f0c8e3a-1b2d-4c5e-8f9a-0b1c2d3e4f50"),
    ("anthropic-ratelimit-unified-status", "allowed"),
    ("anthropic-ratelimit-unified-5h-status", "allowed"),
    ("anthropic-ratelimit-unified-5h-utilization", "0.42"),
    ("anthropic-ratelimit-unified-5h-reset", "1764417600"),
    ("anthropic-ratelimit-unified-7d-status", "allowed_warning"),
    ("anthropic-ratelimit-unified-7d-utilization", "0.81"),
    ("anthropic-ratelimit-unified-7d-reset", "1764806400"),
    ("anthropic-ratelimit-unified-representative-claim", "seven_day"),
    ("anthropic-ratelimit-unified-fallback-percentage", "0.5"),
    ("anthropic-ratelimit-unified-overage-status", "rejected"),
    ("anthropic-ratelimit-unified-reset", "1764806400"),
]
CODEX_HEADERS = [
    ("x-codex-primary-used-percent", "12.5"),
    ("x-codex-primary-window-minutes", "300"),
    ("x-codex-primary-reset-after-seconds", "8040"),
    ("x-codex-secondary-used-percent", "37.0"),
    ("x-codex-secondary-window-minutes", "10080"),
    ("x-codex-secondary-reset-after-seconds", "412000"),
]


def decorate(host: str, path: str, headers: dict[str, str], body: dict[str, Any], reply: Reply) -> Reply:
    auth = headers.get("authorization", "")
    if host == "api.anthropic.com" and auth.startswith("Bearer sk-ant-oat"):
        reply.headers = [*reply.headers, *UNIFIED_HEADERS]
        if _asks_1h_cache(body):
            reply.chunks = [_one_hour(c) for c in reply.chunks]
    elif host == "chatgpt.com":
        reply.headers = [*reply.headers, *CODEX_HEADERS]
    elif host == "cloudcode-pa.googleapis.com":
        reply.chunks = _wrap_code_assist(reply, str(body.get("model") or ""))
    elif host.endswith("githubcopilot.com"):
        reply.headers = [*reply.headers, ("x-github-request-id", "C0F1:2A3B:4C5D6E:7F8091:692AB1C2")]
    return reply


def _asks_1h_cache(body: dict[str, Any]) -> bool:
    text = json.dumps([body.get("system"), body.get("messages"), body.get("tools")])
    return '"ttl": "1h"' in text


def _one_hour(chunk: bytes) -> bytes:
    """The cache write of the reply, moved from the 5-minute to the 1-hour TTL."""
    return chunk.replace(
        b'"ephemeral_5m_input_tokens":1200,"ephemeral_1h_input_tokens":0',
        b'"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":1200',
    ).replace(
        b'"ephemeral_5m_input_tokens": 1200, "ephemeral_1h_input_tokens": 0',
        b'"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 1200',
    )


def _wrap_code_assist(reply: Reply, model: str) -> list[bytes]:
    def wrap(obj: Any) -> Any:
        if isinstance(obj, dict) and "error" not in obj:
            if model:
                obj["modelVersion"] = model
            return {"response": obj, "traceId": "7b3c0e2f9a1d4e5f"}
        return obj

    out: list[bytes] = []
    for chunk in reply.chunks:
        text = chunk.decode()
        if text.startswith("data: "):  # SSE (alt=sse)
            out.append(f"data: {json.dumps(wrap(json.loads(text[6:].strip())))}\n\n".encode())
        elif text.strip().startswith("{"):  # a whole JSON body
            out.append(json.dumps(wrap(json.loads(text))).encode())
        else:
            out.append(chunk)  # a streamed JSON array: Gemini CLI always asks for alt=sse
    return out
