"""Routing is a loop over the adapters' own route declarations (llmtap.adapters.route)."""

from __future__ import annotations

import pytest

from llmtap.adapters import REGISTRY, route
from llmtap.providers import provider_for_host

NO_HEADERS: frozenset[str] = frozenset()


@pytest.mark.parametrize(
    ("host", "path", "api", "provider", "model"),
    [
        ("api.openai.com", "/v1/chat/completions", "openai.chat_completions", "openai", ""),
        ("api.openai.com", "/v1/completions", "openai.completions", "openai", ""),
        ("api.openai.com", "/v1/responses", "openai.responses", "openai", ""),
        ("api.openai.com", "/v1/embeddings/", "openai.embeddings", "openai", ""),
        ("api.anthropic.com", "/v1/messages?beta=true", "anthropic.messages", "anthropic", ""),
        (
            "myres.openai.azure.com",
            "/openai/deployments/gpt-4o/chat/completions?api-version=1",
            "openai.chat_completions",
            "azure.ai.openai",
            "gpt-4o",
        ),
        (
            "generativelanguage.googleapis.com",
            "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
            "gemini.generate_content",
            "gcp.gemini",
            "gemini-2.0-flash",
        ),
        (
            "generativelanguage.googleapis.com",
            "/v1beta/tunedModels/my-tune:generateContent",
            "gemini.generate_content",
            "gcp.gemini",
            "",
        ),
        (
            "us-central1-aiplatform.googleapis.com",
            "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-1.5-pro:generateContent",
            "gemini.generate_content",
            "gcp.vertex_ai",
            "gemini-1.5-pro",
        ),
        (
            "us-east5-aiplatform.googleapis.com",
            "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict",
            "anthropic.messages",
            "gcp.vertex_ai",
            "claude-sonnet-4@20250514",
        ),
        (
            "bedrock-runtime.us-east-1.amazonaws.com",
            "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream",
            "bedrock.converse",
            "aws.bedrock",
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
        ),
        (
            "bedrock-runtime.us-east-1.amazonaws.com",
            "/model/m/invoke-with-response-stream",
            "bedrock.invoke",
            "aws.bedrock",
            "m",
        ),
        ("openrouter.ai", "/api/v1/chat/completions", "openai.chat_completions", "openrouter", ""),
        # Self-hosted and gateway hosts (--intercept): the API names the provider, or the path does.
        ("ollama.internal", "/api/chat", "ollama.chat", "ollama", ""),
        ("ollama.internal", "/api/generate", "ollama.generate", "ollama", ""),
        ("vllm.internal", "/v1/chat/completions", "openai.chat_completions", "openai_compatible", ""),
        (
            "apim.example.com",
            "/openai/deployments/prod-gpt4o/chat/completions",
            "openai.chat_completions",
            "azure.ai.openai",
            "prod-gpt4o",
        ),
        (
            "vertex-proxy.example.com",
            "/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-pro:streamGenerateContent",
            "gemini.generate_content",
            "gcp.vertex_ai",
            "gemini-2.5-pro",
        ),
        (
            "gemini-proxy.example.com",
            "/v1beta/models/gemini-2.0-flash:generateContent",
            "gemini.generate_content",
            "gcp.gemini",
            "gemini-2.0-flash",
        ),
        ("gw.example.com", "/model/m/converse", "bedrock.converse", "aws.bedrock", "m"),
        ("gw.example.com", "/v1/something/else", "", "openai_compatible", ""),
    ],
)
def test_route(host: str, path: str, api: str, provider: str, model: str) -> None:
    m = route("POST", host, path, NO_HEADERS)
    assert m is not None
    assert (m.api, m.provider, m.model) == (api, provider, model)


def test_anthropic_messages_elsewhere_needs_its_headers() -> None:
    """``/messages`` is Anthropic on Anthropic, Bedrock and unknown hosts, or when the request says so."""
    assert route("POST", "api.groq.com", "/openai/v1/messages", NO_HEADERS).api == ""  # type: ignore[union-attr]
    m = route("POST", "api.groq.com", "/v1/messages", frozenset({"anthropic-version"}))
    assert m is not None and (m.api, m.provider) == ("anthropic.messages", "groq")


def test_non_post_requests_are_not_calls() -> None:
    assert route("GET", "api.openai.com", "/v1/models", NO_HEADERS) is None
    assert route("GET", "api.openai.com", "/v1/chat/completions", NO_HEADERS) is None


def test_every_adapter_declares_routes_and_its_hosts_are_known() -> None:
    for adapter in REGISTRY:
        assert adapter.routes, f"{adapter.__name__} declares no routes"
    assert provider_for_host("API.OpenAI.com.") == "openai"
    assert provider_for_host("example.com") is None


def test_agent_endpoints_and_path_limited_hosts() -> None:
    from llmtap.adapters import route_ws
    from llmtap.intercept.routing import Interception
    from llmtap.providers import is_call_path, is_plan_endpoint

    assert route("POST", "chatgpt.com", "/backend-api/codex/responses", NO_HEADERS).api == "openai.responses"  # type: ignore[union-attr]
    for path in ("/backend-api/conversation", "/backend-api/codex/tasks", "/", "/backend-api/codex/responses/x"):
        assert route("POST", "chatgpt.com", path, NO_HEADERS) is None
        assert not is_call_path("chatgpt.com", path)
    m = route("POST", "cloudcode-pa.googleapis.com", "/v1internal:streamGenerateContent?alt=sse", NO_HEADERS)
    assert m is not None and (m.api, m.provider) == ("gemini.generate_content", "gcp.gemini")
    for method in ("loadCodeAssist", "countTokens", "onboardUser", "retrieveUserQuota"):
        assert route("POST", "cloudcode-pa.googleapis.com", f"/v1internal:{method}", NO_HEADERS) is None
    for host in ("api.githubcopilot.com", "api.individual.githubcopilot.com", "api.business.githubcopilot.com"):
        m = route("POST", host, "/chat/completions", NO_HEADERS)
        assert m is not None and (m.api, m.provider) == ("openai.chat_completions", "github_copilot")
        assert is_plan_endpoint(host)
    assert not is_plan_endpoint("api.openai.com") and is_plan_endpoint("chatgpt.com")
    decrypted = Interception([])
    for host in (
        "chatgpt.com",
        "cloudcode-pa.googleapis.com",
        "api.githubcopilot.com",
        "api.enterprise.githubcopilot.com",
    ):
        assert decrypted(host, 443)
    assert not decrypted("www.chatgpt.com", 443) and not decrypted("githubcopilot.com", 443)
    ws = route_ws("api.openai.com", "/v1/realtime?model=gpt-realtime", NO_HEADERS)
    assert ws is not None and (ws.api, ws.model) == ("openai.realtime", "gpt-realtime")
    ws = route_ws("myres.openai.azure.com", "/openai/realtime?api-version=2025-04-01&deployment=rt", NO_HEADERS)
    assert ws is not None and (ws.provider, ws.model) == ("azure.ai.openai", "rt")
    ws = route_ws("api.x.ai", "/v1/responses", NO_HEADERS)
    assert ws is not None and (ws.api, ws.provider) == ("openai.responses", "x_ai")
    assert route_ws("chatgpt.com", "/backend-api/codex/responses", NO_HEADERS) is not None
    assert route_ws("chatgpt.com", "/backend-api/conversation", NO_HEADERS) is None
    assert route_ws("api.openai.com", "/v1/realtime/translations", NO_HEADERS) is None


@pytest.mark.parametrize(
    ("host", "path"),
    [
        # Claude Code 2.1 under llmtap exec (issue #31), and token counting / uploads from the providers' references
        ("api.anthropic.com", "/api/event_logging/v2/batch"),
        ("api.anthropic.com", "/api/eval/sdk-zAZezfDKGoZuXXKe"),
        ("api.anthropic.com", "/v1/messages/count_tokens?beta=true"),
        ("api.openai.com", "/v1/files"),
        ("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.5-flash:countTokens"),
        ("generativelanguage.googleapis.com", "/upload/v1beta/files"),
    ],
)
def test_known_non_llm_paths_are_other_requests(host: str, path: str) -> None:
    """The contract's "Which rows are LLM calls": recorded with api '' and operation 'other', whatever they resemble."""
    m = route("POST", host, path, NO_HEADERS)
    assert m is not None and m.api == "" and m.adapter.operation == "other"
    assert m.provider == provider_for_host(host)


def test_a_model_call_beside_them_is_still_a_call() -> None:
    assert route("POST", "api.anthropic.com", "/v1/messages", NO_HEADERS).api == "anthropic.messages"  # type: ignore[union-attr]
    assert route("GET", "api.anthropic.com", "/v1/models", NO_HEADERS) is None  # a listing: no row at all
