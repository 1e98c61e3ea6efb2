"""Ollama's native ``/api/chat`` and ``/api/generate`` (NDJSON streams, nanosecond durations)."""

from __future__ import annotations

from typing import Any, ClassVar

from ..decode import NDJSON, Framing
from ..record import Api, FinishReason, Operation, cap_message
from .base import Adapter, ErrorInfo, Route, Usage, as_int, as_opt_int, as_str, d

DONE: dict[str, FinishReason] = {"stop": "stop", "length": "length", "load": "stop", "unload": "stop"}


class OllamaChat(Adapter):
    api: ClassVar[Api] = "ollama.chat"
    operation: ClassVar[Operation] = "chat"
    routes = (Route(r"/api/chat$"),)
    default_provider = "ollama"

    def framing(self, content_type: str, path: str) -> Framing:
        # Ollama streams NDJSON unless told not to, under a Content-Type that does not always say so.
        return NDJSON if self.req.stream else super().framing(content_type, path)

    def on_request(self, body: Any) -> None:
        super().on_request(body)
        if isinstance(body, dict):
            self.req.stream = body.get("stream", True) is not False  # Ollama streams unless told not to
            self.req.max_output_tokens = as_opt_int(d(body, "options").get("num_predict"))

    def _text(self, obj: dict[str, Any]) -> str:
        msg = d(obj, "message")
        calls = msg.get("tool_calls")
        if isinstance(calls, list):
            for i, _ in enumerate(calls):
                self.obs.tool_call_keys.add(i)
        return as_str(msg.get("content")) or as_str(msg.get("thinking"))

    def on_object(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict):
            return
        if obj.get("error"):
            self.mid_stream_error(ErrorInfo(message=cap_message(as_str(obj.get("error")))))
            return
        if isinstance(obj.get("model"), str):
            self.obs.response_model = obj["model"]
        text = self._text(obj)
        if text or (obj.get("done") is False and d(obj, "message").get("tool_calls")):
            self.obs.text(text)
            self.content(t)
        if obj.get("done") is True:
            self.obs.terminal = True
            reason = as_str(obj.get("done_reason")) or "stop"
            self.obs.finish_raw, self.obs.finish = reason, DONE.get(reason, "")
            if self.obs.tool_call_keys and self.obs.finish == "stop":
                self.obs.finish = "tool_calls"
            if "prompt_eval_count" in obj or "eval_count" in obj:
                self.obs.usage = Usage(input=as_int(obj.get("prompt_eval_count")), output=as_int(obj.get("eval_count")))
            total = obj.get("total_duration")
            if isinstance(total, (int, float)):
                self.obs.provider_processing_ms = total / 1e6

    def on_json(self, obj: Any, t: float) -> None:
        self.on_object(obj, t)
        self.obs.clock.first = self.obs.clock.last = None
        self.obs.clock.count = 0


class OllamaGenerate(OllamaChat):
    api = "ollama.generate"
    operation = "text_completion"
    routes = (Route(r"/api/generate$"),)

    def _text(self, obj: dict[str, Any]) -> str:
        return as_str(obj.get("response")) or as_str(obj.get("thinking"))
