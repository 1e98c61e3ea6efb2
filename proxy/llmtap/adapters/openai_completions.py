"""OpenAI legacy Completions: chunks have the full-response shape with ``choices[].text``."""

from __future__ import annotations

from typing import Any

from .base import Route
from .openai_chat import AZURE_DEPLOYMENT, OpenAIChat


class OpenAICompletions(OpenAIChat):
    api = "openai.completions"
    operation = "text_completion"
    learns_deltas = False  # its chunks carry text in choices[].text: every one is parsed
    routes = (
        Route(AZURE_DEPLOYMENT + r"/completions$", provider="azure.ai.openai"),
        Route(r"(?<!/chat)/completions$"),
    )

    def _choice_text(self, choice: dict[str, Any]) -> bool:
        text = choice.get("text")
        if isinstance(text, str) and text:
            self.obs.text(text)
            return True
        return False
