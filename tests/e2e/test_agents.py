"""Coding agents end to end: requests shaped as Claude Code, Codex, Gemini CLI and Copilot send
them (their real headers, credential shapes and bodies) → HTTPS_PROXY → a real `llmtap run` → the
mock's agent endpoints (no --intercept).

Header and body shapes: Claude Code 2.1.x captures (the CC wire reference: anthropic-beta set,
metadata.user_id JSON, x-claude-code-session-id, the unified rate-limit headers); Codex CLI
requests to chatgpt.com captured with mitmproxy (originator, chatgpt-account-id, session-id,
the codex_exec User-Agent); gemini-cli code_assist/converter.ts and server.ts (the Code Assist
body and envelope, the GeminiCLI User-Agent); Copilot Chat's editor headers (litellm's and
others' Copilot clients).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import requests
from helpers import Mock, Sidecar, session_id

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def client(sc: Sidecar) -> requests.Session:
    s = requests.Session()
    s.trust_env = False
    s.proxies = {"https": sc.proxy_url}
    s.verify = str(sc.bundle)
    return s


def sse_events(text: str) -> list[Any]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ") and line[6:] != "[DONE]"]


CLAUDE_UA = "claude-cli/2.1.126 (external, cli)"
DEVICE = "be82c3aee1e0c2d74535bacc85f9f559228f02dd8a17298cf522b71e6c375714"


def claude_code_request(session: str, account: str, auth: dict[str, str]) -> tuple[dict[str, str], dict[str, Any]]:
    headers = {
        **auth,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14,"
        "context-management-2025-06-27,prompt-caching-scope-2026-01-05",
        "anthropic-dangerous-direct-browser-access": "true",
        "user-agent": CLAUDE_UA,
        "x-app": "cli",
        "x-claude-code-session-id": session,
        "x-stainless-lang": "js",
        "x-stainless-package-version": "0.60.0",
        "x-stainless-runtime": "node",
        "x-stainless-runtime-version": "v24.3.0",
        "content-type": "application/json",
    }
    user_id = json.dumps({"device_id": DEVICE, "account_uuid": account, "session_id": session}, separators=(",", ":"))
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "stream": True,
        "metadata": {"user_id": user_id},
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.126.75e; cc_entrypoint=cli"},
            {
                "type": "text",
                "text": "You are Claude Code, Anthropic's official CLI for Claude.",
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            },
        ],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "list the files"}]}],
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
    }
    return headers, body


def test_claude_code_with_a_plan_token(proxied: Sidecar) -> None:
    session, account = str(uuid.uuid4()), str(uuid.uuid4())
    headers, body = claude_code_request(session, account, {"authorization": "Bearer sk-ant-oat01-" + "a" * 86})
    with client(proxied) as c:
        r = c.post("https://api.anthropic.com/v1/messages?beta=true", headers=headers, json=body)
    assert r.status_code == 200 and sse_events(r.text)[-1]["type"] == "message_stop"
    (row,) = proxied.rows(f"session_id = '{session}'", 1)
    assert (row["provider"], row["api"], row["transport"]) == ("anthropic", "anthropic.messages", "http")
    assert (row["client_name"], row["client_version"]) == ("claude-code", "2.1.126")
    assert row["billing"] == "subscription"  # an OAuth plan token
    assert row["user_id"] == account  # not the metadata blob
    assert row["cache_write_tokens"] == 1200 and row["cache_write_1h_tokens"] == 1200  # the 1h-TTL write
    rl = row["ratelimit_headers"]
    assert rl["anthropic-ratelimit-unified-5h-utilization"] == "0.42"
    assert rl["anthropic-ratelimit-unified-7d-status"] == "allowed_warning"
    assert rl["anthropic-ratelimit-unified-representative-claim"] == "seven_day"
    assert rl["anthropic-ratelimit-requests-remaining"] == "49"
    assert "anthropic-organization-id" not in rl and "request-id" not in rl
    assert row["cost_usd"] is not None and row["cost_usd"] > 0  # the API-equivalent list price


def test_claude_code_with_an_api_key(proxied: Sidecar) -> None:
    session = str(uuid.uuid4())
    headers, body = claude_code_request(session, "", {"x-api-key": "sk-ant-api03-" + "b" * 90})
    body["system"][1]["cache_control"] = {"type": "ephemeral"}
    with client(proxied) as c:
        assert c.post("https://api.anthropic.com/v1/messages", headers=headers, json=body).status_code == 200
    (row,) = proxied.rows(f"session_id = '{session}'", 1)
    assert (row["billing"], row["user_id"]) == ("api", DEVICE)  # no account in API-key mode: the device
    assert row["cache_write_1h_tokens"] == 0 and row["cache_write_tokens"] == 1200
    assert not any(k.startswith("anthropic-ratelimit-unified") for k in row["ratelimit_headers"])


CODEX_UA = "codex_exec/0.135.0 (Mac OS 15.0.1; arm64) (codex_exec; 0.135.0)"


def codex_headers(session: str) -> dict[str, str]:
    return {
        "authorization": "Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6IjE5MzQ0ZTY1In0.eyJzdWIiOiJ1c2VyIn0.c2ln",
        "chatgpt-account-id": "feabea59-ebc0-4d8d-bc9d-79ccbb36b92f",
        "originator": "codex_exec",
        "session-id": session,
        "thread-id": session,
        "x-client-request-id": session,
        "version": "0.135.0",
        "user-agent": CODEX_UA,
        "accept": "text/event-stream",
        "content-type": "application/json",
    }


def codex_body(session: str) -> dict[str, Any]:
    return {
        "model": "gpt-5-codex",
        "instructions": "You are Codex, a coding agent.",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the test"}]}],
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": session,
    }


def test_codex_on_a_chatgpt_plan(proxied: Sidecar, mock: Mock) -> None:
    session = str(uuid.uuid4())
    with client(proxied) as c:
        r = c.post(
            "https://chatgpt.com/backend-api/codex/responses", headers=codex_headers(session), json=codex_body(session)
        )
        assert r.status_code == 200 and sse_events(r.text)[-1]["type"] == "response.completed"
        # the rest of chatgpt.com is decrypted but passes through untouched and unrecorded
        tag = session_id()
        other = c.post(
            "https://chatgpt.com/backend-api/f/conversation",
            headers={"x-llmtap-session": tag, "user-agent": "Mozilla/5.0"},
            json={"action": "next"},
        )
    assert other.status_code == 404  # the mock's answer, relayed
    (row,) = proxied.rows(f"session_id = '{session}'", 1)
    assert (row["provider"], row["api"], row["server_address"]) == ("openai", "openai.responses", "chatgpt.com")
    assert (row["client_name"], row["client_version"], row["billing"]) == ("codex", "0.135.0", "subscription")
    assert row["request_model"] == "gpt-5-codex" and row["input_tokens"] == 12033
    assert row["ratelimit_headers"]["x-codex-primary-used-percent"] == "12.5"
    assert row["ratelimit_headers"]["x-codex-secondary-window-minutes"] == "10080"
    assert proxied.rows(f"session_id = '{tag}' OR server_address = 'chatgpt.com' AND api = ''", 1, 1.0) == []
    seen = [q for q in mock.requests() if q["path"] == "/backend-api/f/conversation"]
    assert seen and seen[-1]["headers"]["x-llmtap-session"] == tag  # untouched: not even our headers stripped


def test_codex_websocket_mode_on_chatgpt(proxied: Sidecar) -> None:
    from websockets.sync.client import connect

    session = str(uuid.uuid4())
    headers = {**codex_headers(session), "openai-beta": "responses_websockets=2026-02-06"}
    del headers["accept"], headers["content-type"]
    with connect(
        "wss://chatgpt.com/backend-api/codex/responses",
        additional_headers=headers,
        user_agent_header=None,
        proxy=proxied.proxy_url,
        ssl=__import__("ssl").create_default_context(cafile=str(proxied.bundle)),
    ) as ws:
        ws.send(json.dumps({"type": "response.create", **codex_body(session)}))
        while json.loads(ws.recv())["type"] != "response.completed":
            pass
    (row,) = proxied.rows(f"session_id = '{session}'", 1)
    assert (row["transport"], row["billing"], row["client_name"]) == ("websocket", "subscription", "codex")
    assert row["output_tokens"] == 44 and row["outcome"] == "ok"


def test_gemini_cli_code_assist(proxied: Sidecar) -> None:
    session = str(uuid.uuid4())
    headers = {
        "authorization": "Bearer ya29.a0AfH6SMBx-example-oauth-access-token",
        "user-agent": "GeminiCLI/0.30.0/gemini-2.5-pro (linux; x64)",
        "x-goog-api-client": "gl-node/24.3.0",
        "content-type": "application/json",
    }
    body = {
        "model": "gemini-2.5-pro",
        "project": "vivid-ocean-123456",
        "user_prompt_id": "a1b2c3d4e5f6########0",
        "request": {
            "contents": [{"role": "user", "parts": [{"text": "explain this repo"}]}],
            "generationConfig": {"temperature": 0, "topP": 1, "maxOutputTokens": 8192},
            "session_id": session,
        },
    }
    with client(proxied) as c:
        r = c.post(
            "https://cloudcode-pa.googleapis.com/v1internal:streamGenerateContent?alt=sse", headers=headers, json=body
        )
        assert r.status_code == 200 and "response" in sse_events(r.text)[0]
        # other Code Assist calls (setup, quota, experiments) are not LLM calls
        c.post("https://cloudcode-pa.googleapis.com/v1internal:loadCodeAssist", headers=headers, json={})
    (row,) = proxied.rows(f"session_id = '{session}'", 1)
    assert (row["provider"], row["api"], row["billing"]) == ("gcp.gemini", "gemini.generate_content", "subscription")
    assert (row["client_name"], row["client_version"]) == ("gemini-cli", "0.30.0")
    assert (row["request_model"], row["response_model"], row["response_id"]) == (
        "gemini-2.5-pro",
        "gemini-2.5-pro",
        "7b3c0e2f9a1d4e5f",  # traceId: the envelope's
    )
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_tokens"]) == (120, 36, 100)
    assert row["max_output_tokens"] == 8192 and row["content_events"] == 6 and row["outcome"] == "ok"
    assert proxied.rows("server_address = 'cloudcode-pa.googleapis.com'", 2, 1.0) == [row]


def test_copilot_chat(proxied: Sidecar) -> None:
    sid = session_id()
    headers = {
        "authorization": "Bearer tid=8b2f0c1e;exp=1764403200;sku=copilot_for_business_seat;proxy-ep=proxy.business."
        "githubcopilot.com;8kp=1:5c0ffee",
        "editor-version": "vscode/1.107.0",
        "editor-plugin-version": "copilot-chat/0.35.0",
        "copilot-integration-id": "vscode-chat",
        "user-agent": "GitHubCopilotChat/0.35.0",
        "x-github-api-version": "2026-06-01",
        "openai-intent": "conversation-panel",
        "x-request-id": str(uuid.uuid4()),
        "x-llmtap-session": sid,
    }
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "refactor this"}],
        "stream": True,
        "n": 1,
        "temperature": 0.1,
        "max_tokens": 4096,
    }
    with client(proxied) as c:
        r = c.post("https://api.individual.githubcopilot.com/chat/completions", headers=headers, json=body)
    assert r.status_code == 200
    row = proxied.row(sid)
    assert (row["provider"], row["api"], row["billing"]) == (
        "github_copilot",
        "openai.chat_completions",
        "subscription",
    )
    assert (row["client_name"], row["client_version"]) == ("github-copilot", "0.35.0")
    assert row["max_output_tokens"] == 4096 and row["outcome"] == "ok"


def test_claude_code_telemetry_is_no_call(proxied: Sidecar) -> None:
    """Issue #31: Claude Code's event logging and feature-flag requests, answered 404 by the mock, made the overview
    show a 15% error rate with no LLM call failing. They are other requests: rows with api '' (no usage, no
    estimate), out of the overview's figures and check-cost's call count, counted in llmtap_other_requests_total."""
    import subprocess

    from dashboard_kit import W
    from helpers import LLMTAP

    from llmtap.admin.macros import QueryContext, expand

    service, session = f"cc-{uuid.uuid4().hex[:10]}", str(uuid.uuid4())
    headers, body = claude_code_request(session, "", {"x-api-key": "sk-ant-api03-" + "c" * 90})
    other = {k: v for k, v in headers.items() if k in ("x-api-key", "user-agent", "x-claude-code-session-id")}
    before = _other_requests(proxied)
    with client(proxied) as c:
        c.proxies = {"https": proxied.proxy_url.replace("http://", f"http://{service}:x@")}
        assert c.post("https://api.anthropic.com/v1/messages", headers=headers, json=body).status_code == 200
        for path in ("/api/event_logging/v2/batch", "/api/eval/sdk-zAZezfDKGoZuXXKe"):
            r = c.post(f"https://api.anthropic.com{path}", headers=other, json={"events": [{"event_name": "x"}] * 40})
            assert r.status_code in (200, 404)  # the mock's answer, relayed (404 made the error rate of #31)
    rows = proxied.rows(f"session_id = '{session}'", 3)
    llm = [r for r in rows if r["api"]]
    assert [(r["api"], r["outcome"]) for r in llm] == [("anthropic.messages", "ok")]
    for r in (r for r in rows if not r["api"]):
        assert (r["operation"], r["client_name"]) == ("other", "claude-code")
        assert (r["usage_source"], r["input_tokens"], r["cost_usd"]) == ("none", 0, None)
    ctx = QueryContext(__import__("time").time() - 3600, __import__("time").time() + 60, 60, {"service": [service]})
    (fig,) = proxied.sql(
        expand(f"SELECT count() AS calls, countIf(outcome = 'error') AS errors FROM llm_calls WHERE {W}", ctx)
    )
    assert (int(fig["calls"]), int(fig["errors"])) == (1, 0)  # the overview's Calls and Error rate filter
    r = subprocess.run(
        [*LLMTAP, "check-cost", "--service", service, "--window", "1h", "--allow-empty",
         "--admin", f"127.0.0.1:{proxied.admin}", "--data-dir", str(proxied.data_dir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0 and "1 calls in the last 1h" in r.stderr, r.stderr
    assert _other_requests(proxied) - before == 2


def _other_requests(sc: Sidecar) -> float:
    status, text = sc.admin_request("GET", "/metrics")
    assert status == 200
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.decode().splitlines()
        if line.startswith('llmtap_other_requests_total{provider="anthropic",')
    )
