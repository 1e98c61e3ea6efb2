"""Gemini and Vertex AI generateContent: JSON, SSE (alt=sse) and streamed JSON arrays."""

from __future__ import annotations

import json
from typing import Any

from .common import SSE_HEADERS, Reply, json_reply, shape, sse, words
from .jsonmode import gemini_json, pieces

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
    as_json = gemini_json(body)  # responseMimeType application/json (Gemini CLI's router): its schema's JSON
    text = pieces(as_json, 6) if as_json is not None else words(6)
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
                **_modalities(body),
            }
            if _searches(body):  # a grounded answer (Grounding with Google Search)
                chunk["candidates"][0]["groundingMetadata"] = {"webSearchQueries": ["mock query"]}
        chunks.append(chunk)
    if scenario == "mid_stream_error":
        chunks = [
            *chunks[:3],
            {"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}},
        ]
    if ":streamGenerateContent" not in path:
        last = chunks[-1]["candidates"][0]
        merged = {
            **chunks[-1],
            "candidates": [{**last, "content": {"parts": [{"text": "".join(text)}], "role": "model"}}],
        }
        return json_reply(200, merged)
    if "alt=sse" in path:
        return shape(Reply(200, SSE_HEADERS, [sse(c) for c in chunks]), scenario)
    # a streamed JSON array, one element per write
    parts = [("[" if i == 0 else ",\r\n") + json.dumps(c) for i, c in enumerate(chunks)]
    return Reply(
        200, [("content-type", "application/json; charset=UTF-8")], [p.encode() for p in [*parts, "]"]], stream=True
    )


def _parts(body: dict[str, Any]) -> list[Any]:
    contents = body.get("contents")
    return (
        [p for c in contents if isinstance(c, dict) for p in c.get("parts") or []] if isinstance(contents, list) else []
    )


def _modalities(body: dict[str, Any]) -> dict[str, Any]:
    """Token counts by modality, as Gemini reports them (``promptTokensDetails``, ``cacheTokensDetails``): for a
    request with audio (an ``inlineData`` part of an ``audio/*`` type), 100 of its 120 prompt tokens are audio,
    80 of the 100 cached ones too."""

    def mime(p: Any) -> str:
        blob = (p.get("inlineData") or p.get("inline_data") or {}) if isinstance(p, dict) else {}
        return str(blob.get("mimeType") or blob.get("mime_type") or "") if isinstance(blob, dict) else ""

    audio = any(mime(p).startswith("audio/") for p in _parts(body))
    if not audio:
        return {}
    return {
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 20}, {"modality": "AUDIO", "tokenCount": 100}],
        "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 20}, {"modality": "AUDIO", "tokenCount": 80}],
        "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 6}],
    }


def _searches(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    return isinstance(tools, list) and any(
        isinstance(t, dict) and ("googleSearch" in t or "google_search" in t) for t in tools
    )
