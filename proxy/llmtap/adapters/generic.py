"""Any other POST to an intercepted host: an other request, not an LLM call (``api = ''``, ``operation =
'other'``), recorded from what the transport shows (status, timings, bytes) for the other-requests panel.

Its terminal marker is unknown, so a stream that ends cleanly counts as complete; a model,
an id and OpenAI- or Anthropic-style usage are picked up when the body has them.
"""

from __future__ import annotations

from typing import Any

from ..decode import Framing, SSEEvent
from ..record import Api
from .base import Adapter, Usage, as_int, d

GENERIC_API: Api = ""


class GenericJSON(Adapter):
    api = GENERIC_API
    operation = "other"

    def framing(self, content_type: str, path: str) -> Framing:
        framing = super().framing(content_type, path)
        self.req.stream = self.req.stream or framing.stream  # an unknown API: its answer is the evidence
        return framing

    def on_event(self, ev: SSEEvent, t: float) -> None:
        self.obs.terminal = True
        obj = self.parse(ev.data)
        if isinstance(obj, dict):
            self.on_json(obj, t)

    def on_object(self, obj: Any, t: float) -> None:
        self.obs.terminal = True
        self.on_json(obj, t)

    def on_frame(self, msg: Any, t: float) -> None:
        self.obs.terminal = True

    def on_json(self, obj: Any, t: float) -> None:
        self.obs.terminal = True
        if not isinstance(obj, dict) or self.error_in_body(obj):
            return
        if isinstance(obj.get("model"), str):
            self.obs.response_model = obj["model"]
        if isinstance(obj.get("id"), str) and not self.obs.response_id:
            self.obs.response_id = obj["id"]
        u = d(obj, "usage")
        if "prompt_tokens" in u or "input_tokens" in u:
            self.obs.usage = Usage(
                input=as_int(u.get("prompt_tokens", u.get("input_tokens"))),
                output=as_int(u.get("completion_tokens", u.get("output_tokens"))),
            )
