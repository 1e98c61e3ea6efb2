"""Wire-API adapters: one module per API, each declaring its routes and framing.

Adding a wire API is one new module (an :class:`Adapter` subclass with ``api``, ``routes`` and
its hooks) and one line in :data:`REGISTRY` — or, for an API spoken over a WebSocket, a
:class:`WSAdapter` subclass and one line in :data:`WS_REGISTRY`. Routing is a loop over the
registry in order: the first adapter with a matching route speaks for the request.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from ..providers import ProviderName, is_call_path, is_not_call, provider_for_host
from ..record import Api
from .anthropic_batch import AnthropicBatches
from .anthropic_messages import AnthropicMessages
from .base import Adapter, ErrorInfo, Observation, RequestInfo, Route, Usage
from .batch import BatchItem, BatchResults
from .bedrock import BedrockConverse, BedrockInvoke
from .gemini import GeminiGenerateContent
from .generic import GENERIC_API, GenericJSON
from .ollama import OllamaChat, OllamaGenerate
from .openai_batch import OpenAIBatches, OpenAIFileContent
from .openai_chat import OpenAIChat
from .openai_completions import OpenAICompletions
from .openai_embeddings import OpenAIEmbeddings
from .openai_realtime import OpenAIRealtime, RealtimeResponse
from .openai_responses import OpenAIResponses
from .openai_responses_ws import OpenAIResponsesWS
from .websocket import Turn, WSAdapter
from .websocket import query_param as _query_param

# Order matters where paths overlap: the first match wins.
REGISTRY: tuple[type[Adapter], ...] = (
    AnthropicBatches,
    OpenAIBatches,
    OpenAIFileContent,
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
# APIs spoken over a WebSocket, routed on the upgrade request (GET).
WS_REGISTRY: tuple[type[WSAdapter], ...] = (
    OpenAIRealtime,
    OpenAIResponsesWS,
)
_ALL: tuple[type[Adapter], ...] = (*REGISTRY, GenericJSON)
ADAPTERS: dict[str, type[Adapter]] = {a.api: a for a in _ALL}  # by api name


@dataclass(frozen=True, slots=True)
class RouteMatch:
    adapter: type[Adapter]
    provider: ProviderName  # the llm_calls.provider of the call
    model: str = ""  # the model named in the path ('' when the body names it)

    @property
    def api(self) -> Api:
        return self.adapter.api


def route(method: str, host: str, path: str, header_names: frozenset[str]) -> RouteMatch | None:
    """The adapter and provider for a request to an intercepted host; ``None``: not an LLM call.

    A POST no adapter speaks for, or to a path that is never a model call (``NOT_CALL_PATHS``), is
    recorded by :class:`GenericJSON` as an other request (``api = ''``: not an LLM call). The provider
    is the public host's; on other hosts the path's when it names one (an Azure deployment, a Vertex
    publisher model), else the adapter's default.
    """
    if not is_call_path(host, path):
        return None  # a host that serves more than its API (chatgpt.com): not a call
    known = provider_for_host(host)
    p = unquote(path.split("?", 1)[0]).rstrip("/")
    if method == "POST" and is_not_call(p):
        return RouteMatch(GenericJSON, known or GenericJSON.default_provider)
    for adapter in REGISTRY:
        for r in adapter.routes:
            m = r.match(method, p, known, header_names)
            if m is not None:
                model = m.groupdict().get("model") or ""
                return RouteMatch(adapter, known or r.provider or adapter.default_provider, model)
    if method == "POST":
        return RouteMatch(GenericJSON, known or GenericJSON.default_provider)
    return None


@dataclass(frozen=True, slots=True)
class WSRouteMatch:
    adapter: type[WSAdapter]
    provider: ProviderName
    model: str = ""  # from the path (an Azure deployment) or the query (?model=, ?deployment=)

    @property
    def api(self) -> Api:
        return self.adapter.api


def route_ws(host: str, path: str, header_names: frozenset[str]) -> WSRouteMatch | None:
    """The WebSocket adapter for an upgrade request to an intercepted host; ``None``: not an LLM API."""
    if not is_call_path(host, path):
        return None
    known = provider_for_host(host)
    bare, _, query = path.partition("?")
    p = unquote(bare).rstrip("/")
    for adapter in WS_REGISTRY:
        for r in adapter.routes:
            m = r.match("GET", p, known, header_names)
            if m is not None:
                model = m.groupdict().get("model") or _query_param(query, "model", "deployment")
                return WSRouteMatch(adapter, known or r.provider or adapter.default_provider, model)
    return None


__all__ = [
    "ADAPTERS",
    "GENERIC_API",
    "REGISTRY",
    "Adapter",
    "AnthropicBatches",
    "AnthropicMessages",
    "BatchItem",
    "BatchResults",
    "BedrockConverse",
    "BedrockInvoke",
    "ErrorInfo",
    "GeminiGenerateContent",
    "GenericJSON",
    "Observation",
    "OllamaChat",
    "OllamaGenerate",
    "OpenAIBatches",
    "OpenAIChat",
    "OpenAICompletions",
    "OpenAIEmbeddings",
    "OpenAIFileContent",
    "OpenAIRealtime",
    "OpenAIResponses",
    "OpenAIResponsesWS",
    "RealtimeResponse",
    "RequestInfo",
    "Route",
    "RouteMatch",
    "Turn",
    "Usage",
    "WSAdapter",
    "WSRouteMatch",
    "WS_REGISTRY",
    "route",
    "route_ws",
]
