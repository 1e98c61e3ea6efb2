"""Gemini API and Vertex AI ``generateContent`` / ``streamGenerateContent`` (SSE with alt=sse, or a JSON array).

Vertex's REST API answers enums as numbers when asked (``$alt=json;enum-encoding=int``, as the Vertex SDK's REST
transport does: ``"finishReason": 1``): they are read as their names, from the enums of the API reference
(``GenerateContentResponse``: ``Candidate.FinishReason``, ``PromptFeedback.BlockedReason``). The tier that served
the call is ``usageMetadata.serviceTier`` when the response names one (``"standard"``).
"""

from __future__ import annotations

from typing import Any

from ..decode import JSON_ARRAY, SSE, Framing, SSEEvent
from .base import Adapter, Route, Usage, as_int, as_str, d, normalize_finish

# Numbers of the enums as the API reference orders them (aiplatform v1 / generativelanguage v1beta).
FINISH_REASON_NAMES = (
    "FINISH_REASON_UNSPECIFIED",
    "STOP",
    "MAX_TOKENS",
    "SAFETY",
    "RECITATION",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "MALFORMED_FUNCTION_CALL",
)
BLOCKED_REASON_NAMES = ("BLOCKED_REASON_UNSPECIFIED", "SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT")


def enum_name(value: Any, names: tuple[str, ...]) -> str:
    """An enum as its name: a string as sent, a number (``enum-encoding=int``) by its place in ``names``
    (an unknown number as its digits: kept, never guessed)."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, int):
        return names[value] if 0 <= value < len(names) else str(value)
    return as_str(value)


def modality_counts(details: Any) -> dict[str, int]:
    """``[{"modality": "AUDIO", "tokenCount": 120}, …]`` → ``{"AUDIO": 120, …}`` (Vertex's numeric enums too)."""
    out: dict[str, int] = {}
    for item in details if isinstance(details, list) else []:
        if isinstance(item, dict):
            m = item.get("modality")
            name = _MODALITY_ENUM.get(m, "") if isinstance(m, int) else as_str(m).upper()
            out[name] = out.get(name, 0) + as_int(item.get("tokenCount"))
    return out


# google.ai.generativelanguage Modality: 0 unspecified, 1 TEXT, 2 IMAGE, 3 VIDEO, 4 AUDIO, 5 DOCUMENT.
_MODALITY_ENUM = {1: "TEXT", 2: "IMAGE", 3: "VIDEO", 4: "AUDIO", 5: "DOCUMENT"}
_IMAGE = ("IMAGE", "VIDEO")  # priced alike by Gemini: the image columns hold both


def parse_gemini_usage(u: dict[str, Any]) -> Usage:
    thoughts = as_int(u.get("thoughtsTokenCount"))
    prompt, tool = modality_counts(u.get("promptTokensDetails")), modality_counts(u.get("toolUsePromptTokensDetails"))
    out, cached = modality_counts(u.get("candidatesTokensDetails")), modality_counts(u.get("cacheTokensDetails"))
    return Usage(
        input=as_int(u.get("promptTokenCount")) + as_int(u.get("toolUsePromptTokenCount")),
        output=as_int(u.get("candidatesTokenCount")) + thoughts,
        cache_read=as_int(u.get("cachedContentTokenCount")),
        reasoning=thoughts,
        input_audio=prompt.get("AUDIO", 0) + tool.get("AUDIO", 0),
        input_image=sum(prompt.get(m, 0) + tool.get(m, 0) for m in _IMAGE),
        output_audio=out.get("AUDIO", 0),
        output_image=sum(out.get(m, 0) for m in _IMAGE),
        cache_read_audio=cached.get("AUDIO", 0),
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
            if isinstance(usage.get("serviceTier"), str) and usage["serviceTier"]:
                self.obs.service_tier = usage["serviceTier"].lower()
        block = enum_name(d(obj, "promptFeedback").get("blockReason"), BLOCKED_REASON_NAMES)
        if block:
            self.obs.finish_raw, self.obs.finish = block, "content_filter"
            self.obs.terminal = True
        content = False
        for cand in obj.get("candidates") or []:
            if not isinstance(cand, dict):
                continue
            grounding = d(cand, "groundingMetadata")
            if grounding.get("webSearchQueries") or grounding.get("groundingChunks"):
                self.obs.server_tools["grounding"] = 1  # a grounded prompt (billed per prompt, not per chunk)
            for i, part in enumerate(d(cand, "content").get("parts") or []):
                if not isinstance(part, dict):
                    continue
                if isinstance(part.get("text"), str) and part["text"]:
                    self.obs.text(part["text"])
                    content = True
                if isinstance(part.get("functionCall"), dict):
                    self.obs.tool_call_keys.add((cand.get("index", 0), len(self.obs.tool_call_keys), i))
                    content = True
            fr = enum_name(cand.get("finishReason"), FINISH_REASON_NAMES)
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
