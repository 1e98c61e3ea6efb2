"""Wire-API adapters: one module per API, each declaring its routes and framing.

Adding a wire API is one new module (an :class:`Adapter` subclass with ``api``, ``routes`` and
its hooks) and one line in :data:`REGISTRY`. Routing is a loop over the registry in order:
the first adapter with a matching route speaks for the request.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from ..providers import provider_for_host
from .anthropic_messages import AnthropicMessages
from .base import Adapter, ErrorInfo, Observation, RequestInfo, Route, Usage
from .bedrock import BedrockConverse, BedrockInvoke
from .gemini import GeminiGenerateContent
from .generic import GENERIC_API, GenericJSON
from .ollama import OllamaChat, OllamaGenerate
from .openai_chat import OpenAIChat
from .openai_completions import OpenAICompletions
from .openai_embeddings import OpenAIEmbeddings
from .openai_responses import OpenAIResponses

# Order matters where paths overlap: the first match wins.
REGISTRY: tuple[type[Adapter], ...] = (
    GeminiGenerateContent,
    AnthropicMessages,
    BedrockConverse,
    BedrockInvoke,
    OllamaChat,
    OllamaGenerate,
    OpenAIChat,
    OpenAIResponses,
    OpenAICompletions,
    OpenAIEmbeddings,
)
_ALL: tuple[type[Adapter], ...] = (*REGISTRY, GenericJSON)
ADAPTERS: dict[str, type[Adapter]] = {a.api: a for a in _ALL}  # by api name


@dataclass(frozen=True, slots=True)
class RouteMatch:
    adapter: type[Adapter]
    provider: str  # the llm_calls.provider of the call
    model: str = ""  # the model named in the path ('' when the body names it)

    @property
    def api(self) -> str:
        return self.adapter.api


def route(method: str, host: str, path: str, header_names: frozenset[str]) -> RouteMatch | None:
    """The adapter and provider for a request to an intercepted host; ``None``: not an LLM call.

    A POST no adapter speaks for is still a call, recorded by :class:`GenericJSON` from what the
    transport shows. The provider is the public host's; on other hosts the path's when it names
    one (an Azure deployment, a Vertex publisher model), else the adapter's default.
    """
    known = provider_for_host(host)
    p = unquote(path.split("?", 1)[0]).rstrip("/")
    for adapter in REGISTRY:
        for r in adapter.routes:
            m = r.match(method, p, known, header_names)
            if m is not None:
                model = m.groupdict().get("model") or ""
                return RouteMatch(adapter, known or r.provider or adapter.default_provider, model)
    if method == "POST":
        return RouteMatch(GenericJSON, known or GenericJSON.default_provider)
    return None


__all__ = [
    "ADAPTERS",
    "GENERIC_API",
    "REGISTRY",
    "Adapter",
    "AnthropicMessages",
    "BedrockConverse",
    "BedrockInvoke",
    "ErrorInfo",
    "GeminiGenerateContent",
    "GenericJSON",
    "Observation",
    "OllamaChat",
    "OllamaGenerate",
    "OpenAIChat",
    "OpenAICompletions",
    "OpenAIEmbeddings",
    "OpenAIResponses",
    "RequestInfo",
    "Route",
    "RouteMatch",
    "Usage",
    "route",
]
