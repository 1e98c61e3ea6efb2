"""OpenAI Chat Completions (and every OpenAI-compatible server speaking it)."""

from __future__ import annotations

from typing import Any, ClassVar

from ..decode import SSEEvent
from ..record import Api, Operation, cap_message
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
    may_carry_error,
    output_with_reasoning,
)
from .deltas import DeltaTemplate

# Delta keys that carry generated content. A role-only delta does not; neither does an empty one.
_CONTENT_KEYS = ("content", "refusal", "reasoning_content", "reasoning", "audio")


def parse_chat_usage(u: dict[str, Any]) -> Usage:
    ptd = d(u, "prompt_tokens_details")
    ctd = d(u, "completion_tokens_details")
    cache_read = as_int(ptd.get("cached_tokens")) or as_int(u.get("prompt_cache_hit_tokens"))
    prompt = as_int(u.get("prompt_tokens"))
    total = u.get("total_tokens")
    output, reasoning = output_with_reasoning(
        as_int(u.get("completion_tokens")),
        as_int(ctd.get("reasoning_tokens")),
        prompt,
        as_int(total) if isinstance(total, int) and not isinstance(total, bool) else None,
    )
    return Usage(
        input=prompt,
        output=output,
        cache_read=cache_read,
        cache_write=as_int(ptd.get("cache_write_tokens")),
        reasoning=reasoning,
        input_audio=as_int(ptd.get("audio_tokens")),
        input_image=as_int(ptd.get("image_tokens")),
        output_audio=as_int(ctd.get("audio_tokens")),
        output_image=as_int(ctd.get("image_tokens")),
        cache_read_audio=as_int(d(ptd, "cached_tokens_details").get("audio_tokens")),
    )


def content_text(v: Any) -> str:
    """The text of a content value: a string, or a list of parts (Mistral's
    ``[{"type":"thinking","thinking":[{"type":"text","text":…}]},{"type":"text","text":…}]``)."""
    if isinstance(v, str):
        return v
    if not isinstance(v, list):
        return ""
    out: list[str] = []
    for part in v:
        if isinstance(part, dict):
            for key in ("text", "thinking", "content"):
                if key in part:
                    out.append(content_text(part[key]))
        elif isinstance(part, str):
            out.append(part)
    return "".join(out)


# An Azure OpenAI path names its provider and its model (the deployment) whatever host serves it.
AZURE_DEPLOYMENT = r"/openai/deployments/(?P<model>[^/]+)"


def _text_only(obj: dict[str, Any]) -> bool:
    """All the chunk says is one choice's text: one choice, a delta of ``content`` alone, no finish, no usage
    (an event whose bytes later events repeat around another text: :mod:`.deltas`)."""
    choices = obj.get("choices")
    if obj.get("usage") is not None or not isinstance(choices, list) or len(choices) != 1:
        return False
    choice = choices[0]
    if not isinstance(choice, dict) or choice.get("finish_reason"):
        return False
    delta = choice.get("delta")
    return isinstance(delta, dict) and len(delta) == 1 and isinstance(delta.get("content"), str)


class OpenAIChat(Adapter):
    api: ClassVar[Api] = "openai.chat_completions"
    operation: ClassVar[Operation] = "chat"
    learns_deltas: ClassVar[bool] = True  # text-only chunks read from their bytes once one was parsed (.deltas)
    routes = (
        Route(AZURE_DEPLOYMENT + r"/chat/completions$", provider="azure.ai.openai"),
        Route(r"/chat/completions$"),
    )

    def __init__(self) -> None:
        super().__init__()
        self._delta: DeltaTemplate | None = None
        self._delta_obj: dict[str, Any] = {}  # the chunk the template was learned from, parsed

    def on_request(self, body: Any) -> None:
        super().on_request(body)
        if isinstance(body, dict):
            self.req.max_output_tokens = as_opt_int(body.get("max_completion_tokens")) or as_opt_int(
                body.get("max_tokens")
            )
            self.req.wants_stream_usage = d(body, "stream_options").get("include_usage") is True

    def _meta(self, obj: dict[str, Any], groq: Any = None) -> None:
        model = obj.get("model")
        if model and isinstance(model, str):
            self.obs.response_model = model
        tier = obj.get("service_tier")
        if tier and isinstance(tier, str):
            self.obs.service_tier = tier
        rid = obj.get("id")
        if rid and isinstance(rid, str) and not self.obs.response_id:
            self.obs.response_id = rid
        usage = obj.get("usage")
        groq = groq if groq is not None else obj.get("x_groq")
        if not isinstance(usage, dict) and isinstance(groq, dict) and isinstance(groq.get("usage"), dict):
            usage = groq["usage"]  # Groq reports usage under x_groq on the final chunk
        if isinstance(usage, dict):
            # Chat streams report usage once, in a closing chunk: it is final (also beside an error).
            self.set_usage(parse_chat_usage(usage), final=True)
            total_time = usage.get("total_time")
            if isinstance(total_time, (int, float)):
                self.obs.provider_processing_ms = total_time * 1000.0
            cost = usage.get("cost")
            if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                self.obs.provider_cost_usd = float(cost)

    def _delta_has_content(self, choice: dict[str, Any]) -> bool:
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return False
        for k in _CONTENT_KEYS:
            v = delta.get(k)
            if isinstance(v, (str, list)):
                text = content_text(v)
                if text:
                    self.obs.text(text)
                    return True
            elif v:  # audio: a non-empty object
                return True
        calls = delta.get("tool_calls")
        if isinstance(calls, list) and calls:
            for i, call in enumerate(calls):
                if isinstance(call, dict):
                    idx = call.get("index", i)
                    self.obs.tool_call_keys.add((choice.get("index", 0), idx))
                    fn = d(call, "function")
                    self.obs.text(as_str(fn.get("name")) + as_str(fn.get("arguments")))
            return True
        fc = delta.get("function_call")
        if isinstance(fc, dict) and fc:
            self.obs.tool_call_keys.add((choice.get("index", 0), "fc"))
            self.obs.text(as_str(fc.get("arguments")))
            return True
        return False

    def on_event(self, ev: SSEEvent, t: float) -> None:
        data = ev.data
        if self._delta is not None:  # the bytes of the text-only event seen before, with another text
            text = self._delta.match(data)
            if text is not None:
                self._meta(self._delta_obj)  # what those same bytes said besides the text (model, tier, id)
                if text:
                    self.obs.text(text)
                    self.content(t)
                return
        if data.startswith("[DONE]"):
            self.obs.terminal = True
            return
        obj = self.parse(data)
        if not isinstance(obj, dict):
            return
        err = error_from_body(obj) if may_carry_error(obj) else None
        groq = obj.get("x_groq")
        if err is None and isinstance(groq, dict) and isinstance(groq.get("error"), str):
            err = ErrorInfo(message=cap_message(groq["error"]))
        self._meta(obj, groq)
        choices = obj.get("choices")
        has_content = False
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            if err is None and (self._delta_has_content(choice) or self._choice_text(choice)):
                has_content = True
            fr = choice.get("finish_reason")
            if fr:
                self.set_finish(fr)  # kept verbatim, "error" included (OpenRouter)
                if as_str(fr) == "error" and err is None:  # the generation failed, said on the choice
                    err = error_from_body(choice) or ErrorInfo(message=as_str(choice.get("native_finish_reason")))
        if err is not None:
            self.mid_stream_error(err)
            return
        if has_content:
            self.content(t)
        if self._delta is None and self.learns_deltas and groq is None and _text_only(obj):
            self._delta, self._delta_obj = DeltaTemplate.learn(data), obj

    def _choice_text(self, choice: dict[str, Any]) -> bool:
        return False  # chat chunks carry content in ``delta`` only

    def on_json(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict):
            return
        self._meta(obj)
        if self.error_in_body(obj):
            return
        self.obs.terminal = True
        choices = obj.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            msg = d(choice, "message")
            self.obs.text(content_text(msg.get("content")) or as_str(choice.get("text")))
            calls = msg.get("tool_calls")
            if isinstance(calls, list):
                for i, _ in enumerate(calls):
                    self.obs.tool_call_keys.add((choice.get("index", 0), i))
            if choice.get("finish_reason"):
                self.set_finish(choice.get("finish_reason"))
