"""Which tool made a call: the ``User-Agent`` → (``client_name``, ``client_version``).

One table, most specific first: coding agents send their own User-Agent although they are
built on an SDK (Claude Code on anthropic-node), so agents come before SDKs, SDKs before
generic HTTP libraries. The raw User-Agent is never stored: an unknown one gives ``''``.
Patterns are searched case-sensitively in the User-Agent; group 1 is the version.

Sources of the strings (tests/unit/capture/test_identity.py has one real example each):
Claude Code ``claude-cli/<v> (external, cli)``; Codex ``<originator>/<v> (<os>; <arch>) …``
with originators ``codex_cli_rs``, ``codex_exec``, ``codex_vscode``… (codex-rs
``default_client.rs``); Gemini CLI ``GeminiCLI/<v>[/<model>] (<platform>; <arch>)``
(gemini-cli ``contentGenerator.ts``), since 0.4x ``GeminiCLI-<surface>/<v>/<model> (<platform>; <arch>; <surface>)``
(``GeminiCLI-tui/0.61.0/…`` from the npm CLI, issue #31); Cline ``Cline/<v>`` (its ``buildExternalBasicHeaders``);
opencode ``opencode/<v> ai-sdk/provider-utils/<v> runtime/bun/<v>``; Copilot Chat ``GitHubCopilotChat/<v>``;
the Stainless SDKs ``<ClientClass>/Python <v>`` and ``<ClientClass>/JS <v>`` (openai/anthropic
``_base_client``); google-genai ``google-genai-sdk/<v> gl-python/<py>`` (``_api_client.py``);
LiteLLM ``litellm/<v>``.
"""

from __future__ import annotations

import re

# (client_name, pattern) — order matters: the first match wins.
CLIENTS: tuple[tuple[str, str], ...] = (
    ("claude-code", r"\bclaude-cli/([\w.+-]+)"),
    ("claude-code", r"\bclaude-code/([\w.+-]+)"),
    ("codex", r"\bcodex[_-][a-z_]+/([\w.+-]+)"),
    ("codex", r"\bCodex Desktop/([\w.+-]+)"),
    ("gemini-cli", r"\bGeminiCLI(?:-[A-Za-z]+)?/([\w.+-]+)"),  # GeminiCLI-tui/…: the surface since 0.4x
    ("github-copilot", r"\bGitHubCopilotChat/([\w.+-]+)"),
    ("github-copilot", r"\bGithubCopilot/([\w.+-]+)"),
    ("github-copilot", r"\bcopilot-(?:cli|language-server)/([\w.+-]+)"),
    ("cursor", r"(?<![A-Za-z])Cursor/([\w.+-]+)"),
    ("opencode", r"\bopencode/([\w.+-]+)"),
    ("cline", r"\bCline/([\w.+-]+)"),
    ("aider", r"\baider/([\w.+-]+)"),
    ("litellm", r"\blitellm/([\w.+-]+)"),
    ("langchain", r"\blangchain(?:-[a-z-]+)?/([\w.+-]+)"),
    ("openai-python", r"\b(?:Async)?(?:Azure)?OpenAI/Python ([\w.+-]+)"),
    ("openai-node", r"\b(?:Azure)?OpenAI/JS ([\w.+-]+)"),
    ("anthropic-python", r"\b(?:Async)?Anthropic(?:Bedrock|Vertex|Foundry)?/Python ([\w.+-]+)"),
    ("anthropic-node", r"\bAnthropic(?:Bedrock|Vertex|Foundry)?/JS ([\w.+-]+)"),
    ("google-genai", r"\bgoogle-genai-sdk/([\w.+-]+)"),
    ("google-api-client", r"\bgoogle-api-(?:nodejs|python)-client/([\w.+-]+)"),
    ("boto3", r"\bBoto3/([\w.+-]+)"),
    ("botocore", r"\bBotocore/([\w.+-]+)"),
    ("curl", r"^curl/([\w.+-]+)"),
    ("python-httpx", r"\bpython-httpx/([\w.+-]+)"),
    ("python-requests", r"\bpython-requests/([\w.+-]+)"),
    ("aiohttp", r"\baiohttp/([\w.+-]+)"),
    ("go-http-client", r"^Go-http-client/([\w.+-]+)"),
    ("okhttp", r"^okhttp/([\w.+-]+)"),
    ("bun", r"^Bun/([\w.+-]+)"),
    ("deno", r"^Deno/([\w.+-]+)"),
    ("node", r"^node()$"),  # Node's built-in fetch (undici) sends "node"
)
_COMPILED = tuple((name, re.compile(pattern)) for name, pattern in CLIENTS)
MAX_VERSION = 64


def client_from_user_agent(user_agent: str) -> tuple[str, str]:
    """(client_name, client_version); ``("", "")`` when the User-Agent is not in the table."""
    if not user_agent:
        return "", ""
    ua = user_agent[:512]
    for name, rx in _COMPILED:
        m = rx.search(ua)
        if m:
            return name, m.group(1)[:MAX_VERSION]
    return "", ""
