"""OpenAI Responses API: typed events, usage in the terminal ``response.*`` event."""

from __future__ import annotations

from typing import Any

from ..decode import SSEEvent
from ..record import ServerTool, cap_message
from .base import (
    Adapter,
    ErrorInfo,
    Route,
    Usage,
    as_int,
    as_opt_int,
    as_str,
    d,
    error_from_body,
    output_with_reasoning,
)
from .deltas import DeltaTemplate
from .openai_chat import AZURE_DEPLOYMENT

_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
# Output items the client must act on (a function to run, a computer action, a local shell command): tool_calls.
_TOOL_ITEMS = frozenset(
    {"function_call", "custom_tool_call", "computer_call", "local_shell_call", "shell_call", "apply_patch_call"}
)
# Hosted tools OpenAI ran itself (billed per use, nothing left for the client): server_tool_calls by kind.
HOSTED_ITEMS: dict[str, ServerTool] = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_execution",
    "image_generation_call": "image_generation",
    "mcp_call": "mcp",
}
_TEXT_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
    }
)


def parse_responses_usage(u: dict[str, Any]) -> Usage:
    itd = d(u, "input_tokens_details")
    otd = d(u, "output_tokens_details")
    prompt = as_int(u.get("input_tokens"))
    total = u.get("total_tokens")
    output, reasoning = output_with_reasoning(
        as_int(u.get("output_tokens")),
        as_int(otd.get("reasoning_tokens")),
        prompt,
        as_int(total) if isinstance(total, int) and not isinstance(total, bool) else None,
    )
    return Usage(
        input=prompt,
        output=output,
        cache_read=as_int(itd.get("cached_tokens")),
        cache_write=as_int(itd.get("cache_write_tokens")),
        reasoning=reasoning,
        input_audio=as_int(itd.get("audio_tokens")),
        input_image=as_int(itd.get("image_tokens")),
        output_audio=as_int(otd.get("audio_tokens")),
        output_image=as_int(otd.get("image_tokens")),
    )


class OpenAIResponses(Adapter):
    api = "openai.responses"
    operation = "chat"
    routes = (
        Route(AZURE_DEPLOYMENT + r"/responses$", provider="azure.ai.openai"),
        Route(r"/responses$"),
    )

    def __init__(self) -> None:
        super().__init__()
        self._deltas: dict[str, DeltaTemplate] = {}  # per event name, the bytes of the last text delta (.deltas)
        self._hosted: dict[str, set[Any]] = {}  # hosted tool items seen, by kind (their ids)

    def on_request(self, body: Any) -> None:
        super().on_request(body)
        if isinstance(body, dict):
            self.req.max_output_tokens = as_opt_int(body.get("max_output_tokens"))

    def _response(self, resp: dict[str, Any], final: bool = False) -> None:
        if isinstance(resp.get("model"), str) and resp["model"]:
            self.obs.response_model = resp["model"]
        if isinstance(resp.get("service_tier"), str) and resp["service_tier"]:
            self.obs.service_tier = resp["service_tier"]
        if isinstance(resp.get("id"), str) and resp["id"]:
            self.obs.response_id = resp["id"]
        usage = resp.get("usage")
        if isinstance(usage, dict):
            self.set_usage(parse_responses_usage(usage), final)
        output = resp.get("output")
        if isinstance(output, list):
            for i, item in enumerate(output):
                if isinstance(item, dict):
                    self._item(item, i)

    def _item(self, item: dict[str, Any], index: Any) -> bool:
        """An output item: a client tool call (``tool_calls``) or a hosted tool use (``server_tool_calls``)."""
        itype = as_str(item.get("type"))
        key = item.get("id") or index
        if itype in _TOOL_ITEMS:
            self.obs.tool_call_keys.add(key)
            return True
        kind = HOSTED_ITEMS.get(itype)
        if kind is None:
            return False
        seen = self._hosted.setdefault(kind, set())
        seen.add(key)
        self.obs.server_tools[kind] = len(seen)
        return True

    def _terminal(self, resp: dict[str, Any]) -> None:
        self.obs.terminal = True
        self._response(resp, final=True)
        status = as_str(resp.get("status"))
        if status == "incomplete":
            reason = as_str(d(resp, "incomplete_details").get("reason")) or status
            self.set_finish(reason)
        elif status == "failed":
            err = d(resp, "error")
            self.set_finish("failed")
            self.mid_stream_error(
                ErrorInfo(
                    code=as_str(err.get("code")),
                    type=as_str(err.get("type")),
                    message=cap_message(as_str(err.get("message"))),
                )
            )
        elif status:
            self.obs.finish_raw = status
            self.obs.finish = "tool_calls" if self.obs.tool_call_keys else "stop"

    def on_event(self, ev: SSEEvent, t: float) -> None:
        etype = ev.event
        if etype in _TEXT_DELTAS or (etype.endswith(".delta") and etype.startswith("response.")):
            tpl = self._deltas.get(etype)  # the same bytes as the last one but for its text and counters
            delta = tpl.match(ev.data) if tpl is not None else None
            if delta is None:
                obj = self.parse(ev.data)
                delta = obj.get("delta") if isinstance(obj, dict) else None
                if isinstance(delta, str):
                    learned = DeltaTemplate.learn(ev.data, "delta")
                    if learned is not None:
                        self._deltas[etype] = learned
            if isinstance(delta, str):
                if delta:  # an empty delta carries nothing: not a content event
                    self.obs.text(delta)
                    self.content(t)
            elif delta:  # a non-text delta (audio, …)
                self.content(t)
            return
        if ev.data.startswith("[DONE]"):
            return
        obj = self.parse(ev.data)
        if not isinstance(obj, dict):
            return
        etype = as_str(obj.get("type")) or etype
        if etype in _TERMINAL:
            self._terminal(d(obj, "response"))
        elif etype == "error":
            err = error_from_body(obj) or ErrorInfo()
            if not err.code and not err.message:
                err = ErrorInfo(
                    code=as_str(obj.get("code")),
                    type=as_str(obj.get("type")),
                    message=cap_message(as_str(obj.get("message"))),
                )
            self.mid_stream_error(err)
        elif etype in ("response.created", "response.in_progress", "response.queued"):
            self._response(d(obj, "response"))
        elif etype == "response.output_item.added" and self._item(d(obj, "item"), obj.get("output_index")):
            self.content(t)

    def on_json(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict):
            return
        if obj.get("status") != "failed" and self.error_in_body(obj):
            return
        for item in obj.get("output") or []:
            if isinstance(item, dict):
                for part in item.get("content") or []:
                    if isinstance(part, dict):
                        self.obs.text(as_str(part.get("text")))
        self._terminal(obj)
