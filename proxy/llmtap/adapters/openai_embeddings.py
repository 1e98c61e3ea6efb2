"""OpenAI Embeddings: a JSON body with ``usage.prompt_tokens``; no output tokens. OpenAI's has no id; the
OpenAI-compatible ones that do (Mistral's ``"id": "cc93…"``) keep it as ``response_id``."""

from __future__ import annotations

from typing import Any

from .base import Adapter, Route, Usage, as_int, as_str
from .openai_chat import AZURE_DEPLOYMENT


class OpenAIEmbeddings(Adapter):
    api = "openai.embeddings"
    operation = "embeddings"
    routes = (
        Route(AZURE_DEPLOYMENT + r"/embeddings$", provider="azure.ai.openai"),
        Route(r"/embeddings$"),
    )

    def on_json(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict):
            return
        if self.error_in_body(obj):
            return
        self.obs.terminal = True
        self.obs.response_model = as_str(obj.get("model"))
        self.obs.response_id = as_str(obj.get("id"))
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self.obs.usage = Usage(input=as_int(usage.get("prompt_tokens")))
