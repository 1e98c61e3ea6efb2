"""Gemini API and Vertex AI ``generateContent`` / ``streamGenerateContent`` (SSE with alt=sse, or a JSON array)."""

from __future__ import annotations

from typing import Any

from ..decode import JSON_ARRAY, SSE, Framing, SSEEvent
from .base import Adapter, Route, Usage, as_int, as_str, d, normalize_finish


def parse_gemini_usage(u: dict[str, Any]) -> Usage:
    thoughts = as_int(u.get("thoughtsTokenCount"))
    return Usage(
        input=as_int(u.get("promptTokenCount")) + as_int(u.get("toolUsePromptTokenCount")),
        output=as_int(u.get("candidatesTokenCount")) + thoughts,
        cache_read=as_int(u.get("cachedContentTokenCount")),
        reasoning=thoughts,
    )


class GeminiGenerateContent(Adapter):
    api = "gemini.generate_content"
    operation = "generate_content"
    routes = (
        # Vertex AI: /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent
        Route(
            r"/projects/[^/]+/locations/[^/]+/publishers/google/models/(?P<model>[^/:]+):(stream)?generatecontent$",
            provider="gcp.vertex_ai",
        ),
        Route(r"/models/(?P<model>[^/:]+):(stream)?generatecontent$"),
        Route(r":(stream)?generatecontent$"),  # tuned models, Code Assist: the body names the model
    )
    default_provider = "gcp.gemini"

    def framing(self, content_type: str, path: str) -> Framing:
        if "text/event-stream" in content_type:
            return SSE
        if ":streamgeneratecontent" in path.lower():
            return JSON_ARRAY  # streamGenerateContent without alt=sse: one JSON array, element by element
        return super().framing(content_type, path)

    def on_target(self, path: str) -> None:
        self.req.stream = ":streamgeneratecontent" in path.split("?", 1)[0].lower()

    def on_request(self, body: Any) -> None:
        super().on_request(body)
        if isinstance(body, dict) and isinstance(body.get("request"), dict):
            body = body["request"]  # Code Assist: {"model", "project", "request": {contents, ...}}
        cfg = d(body, "generationConfig")
        if isinstance(cfg.get("maxOutputTokens"), int):
            self.req.max_output_tokens = cfg["maxOutputTokens"]

    def on_event(self, ev: SSEEvent, t: float) -> None:
        obj = self.parse(ev.data)
        if obj is not None:
            self.on_object(obj, t)

    def on_object(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict):
            return
        if isinstance(obj.get("response"), dict):  # Code Assist: {"response": {...}, "traceId": "..."}
            if isinstance(obj.get("traceId"), str) and obj["traceId"] and not self.obs.response_id:
                self.obs.response_id = obj["traceId"]
            obj = obj["response"]
        if self.error_in_body(obj):
            return
        if isinstance(obj.get("modelVersion"), str) and obj["modelVersion"]:
            self.obs.response_model = obj["modelVersion"]
        if isinstance(obj.get("responseId"), str) and obj["responseId"] and not self.obs.response_id:
            self.obs.response_id = obj["responseId"]
        usage = obj.get("usageMetadata")
        if isinstance(usage, dict):
            self.obs.usage = parse_gemini_usage(usage)  # cumulative: the last one wins
        block = as_str(d(obj, "promptFeedback").get("blockReason"))
        if block:
            self.obs.finish_raw, self.obs.finish = block, "content_filter"
            self.obs.terminal = True
        content = False
        for cand in obj.get("candidates") or []:
            if not isinstance(cand, dict):
                continue
            for i, part in enumerate(d(cand, "content").get("parts") or []):
                if not isinstance(part, dict):
                    continue
                if isinstance(part.get("text"), str) and part["text"]:
                    self.obs.text(part["text"])
                    content = True
                if isinstance(part.get("functionCall"), dict):
                    self.obs.tool_call_keys.add((cand.get("index", 0), len(self.obs.tool_call_keys), i))
                    content = True
            fr = as_str(cand.get("finishReason"))
            if fr:
                self.obs.finish_raw = fr
                self.obs.finish = normalize_finish(fr)
                if self.obs.tool_call_keys and self.obs.finish == "stop":
                    self.obs.finish = "tool_calls"
                self.obs.terminal = True
        if content:
            self.content(t)

    def on_json(self, obj: Any, t: float) -> None:
        if isinstance(obj, list):  # a whole streamed array read as one body
            for item in obj:
                self.on_object(item, t)
            return
        if self.error_in_body(obj):
            return
        self.on_object(obj, t)
        self.obs.clock.first = self.obs.clock.last = None  # a non-stream body has no token timing
        self.obs.clock.count = 0
