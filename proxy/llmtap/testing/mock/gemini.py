"""Gemini and Vertex AI generateContent: JSON, SSE (alt=sse) and streamed JSON arrays."""

from __future__ import annotations

import json
from typing import Any

from .common import SSE_HEADERS, Reply, json_reply, shape, sse, words

# -- Gemini / Vertex ---------------------------------------------------------------------------------


def gemini(path: str, body: dict[str, Any], scenario: str) -> Reply:
    model = path.split("/models/")[-1].split(":")[0] if "/models/" in path else "gemini-2.0-flash"
    if scenario == "quota_per_minute":
        return json_reply(
            429,
            {
                "error": {
                    "code": 429,
                    "status": "RESOURCE_EXHAUSTED",
                    "message": "You exceeded your current quota, please check your plan and billing details.",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                            "violations": [
                                {
                                    "quotaMetric": "generativelanguage.googleapis.com/free_tier_requests",
                                    "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                                }
                            ],
                        }
                    ],
                }
            },
        )
    if scenario == "quota_per_day":
        return json_reply(
            429,
            {
                "error": {
                    "code": 429,
                    "status": "RESOURCE_EXHAUSTED",
                    "message": "You exceeded your current quota.",
                    "details": [{"violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}],
                }
            },
        )
    text = words(6)
    chunks = []
    for i, t in enumerate(text):
        chunk: dict[str, Any] = {
            "candidates": [{"content": {"parts": [{"text": t}], "role": "model"}, "index": 0}],
            "usageMetadata": {"promptTokenCount": 120, "cachedContentTokenCount": 100, "totalTokenCount": 120},
            "modelVersion": model,
            "responseId": "gemini-resp-1",
        }
        if i == len(text) - 1:
            chunk["candidates"][0]["finishReason"] = "STOP"
            chunk["usageMetadata"] = {
                "promptTokenCount": 120,
                "cachedContentTokenCount": 100,
                "candidatesTokenCount": 6,
                "thoughtsTokenCount": 30,
                "totalTokenCount": 156,
            }
        chunks.append(chunk)
    if scenario == "mid_stream_error":
        chunks = [
            *chunks[:3],
            {"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}},
        ]
    if ":streamGenerateContent" not in path:
        merged = {
            **chunks[-1],
            "candidates": [
                {"content": {"parts": [{"text": "".join(text)}], "role": "model"}, "finishReason": "STOP", "index": 0}
            ],
        }
        return json_reply(200, merged)
    if "alt=sse" in path:
        return shape(Reply(200, SSE_HEADERS, [sse(c) for c in chunks]), scenario)
    # a streamed JSON array, one element per write
    parts = [("[" if i == 0 else ",\r\n") + json.dumps(c) for i, c in enumerate(chunks)]
    return Reply(
        200, [("content-type", "application/json; charset=UTF-8")], [p.encode() for p in [*parts, "]"]], stream=True
    )
