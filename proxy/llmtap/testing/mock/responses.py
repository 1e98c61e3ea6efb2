"""The OpenAI Responses API (SSE and, through :mod:`.ws_responses`, WebSocket mode).

A streamed answer is the event sequence the API sends for one text message (``tests/corpus/openai/
responses_stream_text.sse``): ``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, the ``response.output_text.delta`` events, ``response.output_text.done``,
``response.content_part.done``, ``response.output_item.done``, ``response.completed`` — what the official SDKs'
``responses.stream()`` accumulators and Codex need to assemble the answer.

A ``"generate": false`` create (WebSocket-mode warm-up, Codex's prewarm) prepares the request's state and
generates nothing: ``response.created`` then ``response.completed`` with no output, ``output_tokens`` 0 and as
input only what the request itself carried (the turn that follows reports its own usage).
A ``text.format`` of ``json_schema``/``json_object`` is answered with JSON (:mod:`.jsonmode`).
"""

from __future__ import annotations

import json
from typing import Any

from .common import CREATED, OPENAI_HEADERS, SSE_HEADERS, Reply, json_reply, obfuscation, shape, sse, words
from .jsonmode import pieces, responses_json
from .openai import served_tier

USAGE = {
    "input_tokens": 12033,
    "input_tokens_details": {"cached_tokens": 11904},
    "output_tokens": 44,
    "output_tokens_details": {"reasoning_tokens": 12},
    "total_tokens": 12077,
}


def carried_tokens(body: dict[str, Any]) -> int:
    """The input a warm-up carries, at ~4 bytes a token: its instructions, input items and tools (0 for none)."""
    parts = [body.get(k) for k in ("instructions", "input", "tools")]
    return sum(len(json.dumps(p, ensure_ascii=False)) // 4 for p in parts if p)


def openai_responses(body: dict[str, Any], scenario: str) -> Reply:
    model = body.get("model", "gpt-4.1")
    resp: dict[str, Any] = {
        "id": "resp_mock456",
        "object": "response",
        "created_at": CREATED,
        "status": "in_progress",
        "service_tier": served_tier(body),
        "model": f"{model}-2025-04-14",
        "output": [],
        "error": None,
        "incomplete_details": None,
        "usage": None,
    }
    usage: dict[str, Any] = dict(USAGE)
    warmup = body.get("generate") is False
    if warmup:
        carried = carried_tokens(body)
        usage = {
            "input_tokens": carried,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": carried,
        }
    if isinstance(body.get("_mock_usage"), dict):
        usage = {**usage, **body["_mock_usage"]}
    as_json = responses_json(body)
    text = pieces(as_json, 6) if as_json is not None else words(6)
    whole = "".join(text)
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": whole}
    item = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [part]}
    done = {**resp, "status": "completed", "usage": usage, "output": [] if warmup else [item]}
    if not body.get("stream"):
        return json_reply(200, done, OPENAI_HEADERS)
    seq = iter(range(10_000))

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

    ev = [event("response.created", response=resp)]
    if warmup:
        ev.append(event("response.completed", response=done))
        return Reply(200, SSE_HEADERS + OPENAI_HEADERS, ev)
    ev.append(event("response.in_progress", response=resp))
    if scenario == "failed_rate_limit":
        failed = {
            **resp,
            "status": "failed",
            "error": {
                "code": "rate_limit_exceeded",
                "message": "Rate limit reached for gpt-4.1 in organization org-AAA on tokens per min (TPM): "
                "Limit 30000, Used 22999, Requested 12528. Please try again in 11.054s.",
            },
        }
        ev.append(event("response.failed", response=failed))
        return Reply(200, SSE_HEADERS + OPENAI_HEADERS, ev)
    at = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    opened = {**item, "status": "in_progress", "content": []}
    ev.append(event("response.output_item.added", output_index=0, item=opened))
    ev.append(event("response.content_part.added", **at, part={**part, "text": ""}))
    pad = obfuscation(body)
    ev += [event("response.output_text.delta", **at, delta=t, logprobs=[], **pad()) for t in text]
    ev.append(event("response.output_text.done", **at, text=whole, logprobs=[]))
    ev.append(event("response.content_part.done", **at, part=part))
    ev.append(event("response.output_item.done", output_index=0, item=item))
    ev.append(event("response.completed", response=done))
    return shape(Reply(200, SSE_HEADERS + OPENAI_HEADERS, ev), scenario)
