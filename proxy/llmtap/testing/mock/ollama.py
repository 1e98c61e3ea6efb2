"""Ollama native /api/chat and /api/generate (NDJSON)."""

from __future__ import annotations

import json
from typing import Any

from .common import Reply, json_reply, words

# -- Ollama native (NDJSON) -------------------------------------------------------------------------------


def ollama(path: str, body: dict[str, Any], scenario: str) -> Reply:
    model = body.get("model", "llama3.2")
    key = "message" if path.endswith("/api/chat") else "response"
    lines = []
    for t in words(5):
        part: dict[str, Any] = {"model": model, "created_at": "2026-11-29T08:52:19.385406455Z", "done": False}
        part[key] = {"role": "assistant", "content": t} if key == "message" else t
        lines.append(part)
    if scenario == "mid_stream_error":
        lines = [*lines[:2], {"error": "model runner has unexpectedly stopped"}]
    else:
        lines.append(
            {
                "model": model,
                "created_at": "2026-11-29T08:52:20Z",
                "done": True,
                "done_reason": "stop",
                key: {"role": "assistant", "content": ""} if key == "message" else "",
                "total_duration": 4883583458,
                "load_duration": 1334875,
                "prompt_eval_count": 26,
                "prompt_eval_duration": 342546000,
                "eval_count": 282,
                "eval_duration": 4535599000,
            }
        )
    if body.get("stream") is False:
        return json_reply(
            200,
            {
                **lines[-1],
                key: {"role": "assistant", "content": "".join(words(5))} if key == "message" else "".join(words(5)),
            },
        )
    return Reply(
        200, [("content-type", "application/x-ndjson")], [json.dumps(x).encode() + b"\n" for x in lines], stream=True
    )
