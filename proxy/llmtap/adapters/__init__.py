"""Wire-API adapters. One module per API, all behind :class:`~llmtap.adapters.base.Adapter`."""

from __future__ import annotations

from .anthropic_messages import AnthropicMessages
from .base import Adapter, Observation, RequestInfo, Usage
from .bedrock import BedrockConverse, BedrockInvoke
from .gemini import GeminiGenerateContent
from .generic import GENERIC_API, GenericJSON
from .ollama import OllamaChat, OllamaGenerate
from .openai_chat import OpenAIChat
from .openai_completions import OpenAICompletions
from .openai_embeddings import OpenAIEmbeddings
from .openai_responses import OpenAIResponses

ADAPTERS: dict[str, type[Adapter]] = {
    a.api: a
    for a in (
        OpenAIChat,
        OpenAICompletions,
        OpenAIEmbeddings,
        OpenAIResponses,
        AnthropicMessages,
        GeminiGenerateContent,
        BedrockConverse,
        BedrockInvoke,
        OllamaChat,
        OllamaGenerate,
        GenericJSON,
    )
}

__all__ = [
    "ADAPTERS",
    "GENERIC_API",
    "Adapter",
    "GenericJSON",
    "AnthropicMessages",
    "Observation",
    "OpenAIChat",
    "OpenAICompletions",
    "OpenAIEmbeddings",
    "OpenAIResponses",
    "RequestInfo",
    "Usage",
]
