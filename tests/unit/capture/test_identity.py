"""Who called and who pays: the User-Agent table (real strings from the tools' sources and
captures), billing from credential shapes and plan endpoints, agents' composite user ids."""

from __future__ import annotations

import pytest

from llmtap.capture.clients import client_from_user_agent
from llmtap.capture.identity import agent_user, billing, body_session


@pytest.mark.parametrize(
    ("ua", "name", "version"),
    [
        # Claude Code 2.1.126 captures; the Agent SDK runs the same CLI
        ("claude-cli/2.1.126 (external, cli)", "claude-code", "2.1.126"),
        ("claude-cli/2.1.288 (external, sdk-cli)", "claude-code", "2.1.288"),
        ("claude-code/2.0.37", "claude-code", "2.0.37"),
        # codex-rs default_client.rs: "{originator}/{version} ({os} {os_version}; {arch}) {terminal}"
        ("codex_cli_rs/0.38.0 (Ubuntu 24.04.2 LTS; x86_64) WindowsTerminal", "codex", "0.38.0"),
        ("codex_exec/0.135.0 (Mac OS 15.0.1; arm64) (codex_exec; 0.135.0)", "codex", "0.135.0"),
        # gemini-cli contentGenerator.ts: `GeminiCLI/${version}[/${model}] (${platform}; ${arch})`
        ("GeminiCLI/0.9.0 (linux; x64)", "gemini-cli", "0.9.0"),
        ("GeminiCLI/0.30.0/gemini-2.5-pro (darwin; arm64)", "gemini-cli", "0.30.0"),
        # since 0.4x the surface is in the name: a gemini-cli 0.44.1 error report's Gaxios request config (verbatim,
        # the googleapis client's UA appended), and the prefix seen from @google/gemini-cli 0.61.0 (issue #31:
        # "GeminiCLI-tui/0.61.0/…"), completed in the same form
        ("GeminiCLI-tui/0.61.0/gemini-2.5-flash (linux; x64; terminal)", "gemini-cli", "0.61.0"),
        (
            "GeminiCLI-tui/0.44.1/gemini-3.1-pro-preview (darwin; arm64; terminal) google-api-nodejs-client/9.15.1",
            "gemini-cli",
            "0.44.1",
        ),
        # Cline's buildExternalBasicHeaders: `Cline/${ExtensionRegistryInfo.version}`
        ("Cline/3.74.0", "cline", "3.74.0"),
        # opencode on the AI SDK under Bun (as a gateway's client table records it): the agent, not the runtime
        ("opencode/1.3.13 ai-sdk/provider-utils/4.0.21 runtime/bun/1.3.13", "opencode", "1.3.13"),
        ("Bun/1.3.1", "bun", "1.3.1"),  # Bun's own fetch: the runtime, all a UA says (Claude Code's telemetry)
        ("GitHubCopilotChat/0.26.7", "github-copilot", "0.26.7"),
        ("GithubCopilot/1.155.0", "github-copilot", "1.155.0"),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Cursor/0.48.6 "
            "Chrome/132.0.6834.210 Electron/34.3.4 Safari/537.36",
            "cursor",
            "0.48.6",
        ),
        # the Stainless SDKs: f"{self.__class__.__name__}/Python {version}", `${name}/JS ${VERSION}`
        ("OpenAI/Python 3.57.0", "openai-python", "3.57.0"),
        ("AsyncOpenAI/Python 1.54.3", "openai-python", "1.54.3"),
        ("AzureOpenAI/Python 1.54.3", "openai-python", "1.54.3"),
        ("OpenAI/JS 4.73.0", "openai-node", "4.73.0"),
        ("Anthropic/Python 2.14.0", "anthropic-python", "2.14.0"),
        ("AsyncAnthropicBedrock/Python 0.69.0", "anthropic-python", "0.69.0"),
        ("Anthropic/JS 0.39.0", "anthropic-node", "0.39.0"),
        # google-genai _api_client.py: "google-genai-sdk/{v} gl-python/{py}"; the JS SDK: gl-node
        ("google-genai-sdk/3.6.1 gl-python/3.12.1", "google-genai", "3.6.1"),
        ("google-genai-sdk/1.30.0 gl-node/v22.21.0", "google-genai", "1.30.0"),
        ("litellm/1.74.15", "litellm", "1.74.15"),
        ("langchain-google-genai/2.1.9", "langchain", "2.1.9"),
        ("curl/8.5.0", "curl", "8.5.0"),
        ("python-requests/2.32.3", "python-requests", "2.32.3"),
        ("python-httpx/0.28.1", "python-httpx", "0.28.1"),
        ("node", "node", ""),
        ("Precursor/0.9.6", "", ""),  # not Cursor
        ("Mozilla/5.0 (X11; Linux x86_64)", "", ""),
        ("", "", ""),
    ],
)
def test_user_agent_table(ua: str, name: str, version: str) -> None:
    assert client_from_user_agent(ua) == (name, version)


def test_billing_from_the_credential_shape_and_the_endpoint() -> None:
    assert billing(False, {"authorization": "Bearer sk-ant-oat01-abc"}) == "subscription"
    assert billing(False, {"x-api-key": "sk-ant-api03-abc"}) == "api"
    assert billing(False, {"authorization": "Bearer sk-proj-abc"}) == "api"
    assert billing(False, {"authorization": "AWS4-HMAC-SHA256 Credential=AKIA/…"}) == "api"
    assert billing(False, {}, "alt=sse&key=AIzaSy") == "api"
    assert billing(True, {"authorization": "Bearer eyJ…"}) == "subscription"  # chatgpt.com, Code Assist, Copilot
    assert billing(False, {}) == ""  # a self-hosted server without a credential


def test_agent_user_ids() -> None:
    blob = '{"device_id":"d1","account_uuid":"acc-9","session_id":"s-7"}'
    assert agent_user(blob) == ("acc-9", "s-7")
    assert agent_user('{"device_id":"d1","account_uuid":"","session_id":"s-7"}') == ("d1", "s-7")  # API-key mode
    legacy = (
        "user_19f2f4ee153d47fb2ef3e7954239ff16d3bff6daddd7cac0b1e7e3794fcaae80_account_"
        "a929b7ef-d758-4a98-b88e-07166e6c8537_session_34832e57-9b65-4df6-9604-60b9fc786bcb"
    )
    assert agent_user(legacy) == ("a929b7ef-d758-4a98-b88e-07166e6c8537", "34832e57-9b65-4df6-9604-60b9fc786bcb")
    assert agent_user("end-user-42") == ("end-user-42", "")
    assert agent_user('{"team": "x"}') == ('{"team": "x"}', "")
    assert agent_user("{not json") == ("{not json", "")


def test_code_assist_body_session() -> None:
    assert body_session({"model": "m", "request": {"contents": [], "session_id": "sess-1"}}) == "sess-1"
    assert body_session({"request": {}}) == "" and body_session(None) == ""
