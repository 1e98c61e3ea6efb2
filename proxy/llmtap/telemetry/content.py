"""Opt-in content capture (``--capture-content``): prompts and completions, redacted and capped.

Content goes on the span as the OTel GenAI opt-in attributes ``gen_ai.input.messages``
and ``gen_ai.output.messages`` (JSON strings in the semconv message shape), and from
there, through the materialized view, into the ``llm_content`` table, which has its
own retention. Off by default: nothing of the prompt or answer is kept otherwise.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..record import CallRecord
from .redact import redact

if TYPE_CHECKING:
    from ..capture import CallContext

MAX_CONTENT_CHARS = 32_768  # per side, after redaction
TRUNCATED = "…[truncated by llmtap]"


def _cap(text: str) -> str:
    return text if len(text) <= MAX_CONTENT_CHARS else text[: MAX_CONTENT_CHARS - len(TRUNCATED)] + TRUNCATED


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                t = p.get("text") or p.get("content") or p.get("input_text")
                if isinstance(t, str):
                    parts.append(t)
        return "\n".join(parts)
    return ""


def input_messages(body: Any) -> list[dict[str, Any]]:
    """Request body → [{role, parts: [{type: "text", content}]}] (semconv input shape)."""
    if not isinstance(body, dict):
        return []
    out: list[dict[str, Any]] = []
    system = body.get("system") or body.get("instructions")
    if system:
        out.append({"role": "system", "parts": [{"type": "text", "content": _text_of(system)}]})
    msgs = body.get("messages")
    if isinstance(msgs, list):
        for m in msgs:
            if isinstance(m, dict):
                out.append(
                    {
                        "role": str(m.get("role", "user")),
                        "parts": [{"type": "text", "content": _text_of(m.get("content"))}],
                    }
                )
    for key in ("input", "prompt"):
        v = body.get(key)
        if isinstance(v, str):
            out.append({"role": "user", "parts": [{"type": "text", "content": v}]})
        elif isinstance(v, list):
            for item in v:
                if isinstance(item, dict) and "content" in item:
                    role = str(item.get("role", "user"))
                    out.append({"role": role, "parts": [{"type": "text", "content": _text_of(item["content"])}]})
                elif isinstance(item, str):
                    out.append({"role": "user", "parts": [{"type": "text", "content": item}]})
    return out


def _redact_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each text redacted as the text it is (before JSON quotes it once more), then the whole again."""
    for m in messages:
        for part in m.get("parts", []):
            if isinstance(part.get("content"), str):
                part["content"] = redact(part["content"])
    return messages


def content_attributes(body: Any, output_text: str, finish_reason: str) -> tuple[str, str]:
    """(``gen_ai.input.messages``, ``gen_ai.output.messages``): the prompt and the answer, redacted and capped."""
    inp = _redact_parts(input_messages(body))
    out = _redact_parts(
        [{"role": "assistant", "parts": [{"type": "text", "content": output_text}], "finish_reason": finish_reason}]
    )
    return _cap(redact(json.dumps(inp, ensure_ascii=False))), _cap(redact(json.dumps(out, ensure_ascii=False)))


class ContentCapture:
    """The :class:`~llmtap.pipeline.Enricher` of ``--capture-content``: content onto the span."""

    def enrich(self, record: CallRecord, ctx: CallContext) -> None:
        record.input_messages, record.output_messages = content_attributes(
            ctx.request, ctx.output_text, record.finish_reason
        )
