"""The providers' and agents' requests that are not model calls, answered the way the real services answer them.

A new user's first run is an agent against the mock: its telemetry, feature flags, account checks and model
listings must succeed as they do against the real hosts, or the agent retries, waits or gives up (and the
dashboards show errors no LLM call made). What each agent calls was taken from running it against the mock
(Claude Code 2.1.332, Codex CLI 0.171.0, Gemini CLI 0.61.0): the paths below, by host.

- Claude Code (``api.anthropic.com``): ``POST /api/event_logging/v2/batch`` (its event log; the Bun runtime
  posts there too), ``POST /api/eval/sdk-…`` (GrowthBook remote evaluation of its feature flags), ``GET
  /api/claude_cli/bootstrap``, ``/api/claude_code/settings``, ``/api/claude_code/policy_limits``,
  ``/api/claude_code_penguin_mode``, ``/api/directory/server-urls``, ``/api/claude_code/organizations/
  metrics_enabled``.
- Codex (``chatgpt.com/backend-api``): ``/wham/accounts/check`` and the other ``/wham/…`` account paths of a
  ChatGPT-plan login, ``/plugins/…``, ``/codex/…`` listings; its analytics (``/codex/analytics-events/…``).
- Gemini CLI: Clearcut (``play.googleapis.com/log``) takes its usage statistics.
- ``GET /v1/models`` (OpenAI, Anthropic) and ``GET /v1beta/models`` (Gemini): a model list in each API's shape.

Anything else on these paths (an unknown ``/api/…`` or Codex ``/backend-api/…`` route) is answered ``{}`` with
200, as the services answer a telemetry post; no wire API's path is among these (``/backend-api/codex/responses`` is
Codex's model call and is not answered here).
"""

from __future__ import annotations

import re
from typing import Any

from .common import CREATED, Reply, json_reply

OPENAI_MODELS = ["gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini", "gpt-5", "gpt-5-codex", "o4-mini"]
ANTHROPIC_MODELS = ["claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805", "claude-haiku-4-5-20251001"]
GEMINI_MODELS = ["gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.0-flash"]
# Codex's own paths under chatgpt.com/backend-api (the ChatGPT web app's, such as /f/conversation, are not its)
CODEX_PATHS = ("/backend-api/wham/", "/backend-api/codex/", "/backend-api/plugins/", "/backend-api/ps/")
_EVAL = re.compile(r"^/api/eval/sdk-[A-Za-z0-9]+$")


def answer(method: str, host: str, path: str, headers: dict[str, str]) -> Reply | None:
    """The reply to a non-LLM request of a known service, or None (not one of them)."""
    bare = path.split("?", 1)[0].rstrip("/")
    if method == "GET" and bare in ("/v1/models", "/models", "/v1beta/models", "/v1/models/"):
        return models(host)
    if host == "api.anthropic.com" and bare.startswith("/api/"):
        return json_reply(200, claude_code(bare))
    if host == "chatgpt.com" and bare.startswith(CODEX_PATHS) and "/responses" not in bare:
        return json_reply(200, codex(bare, headers.get("chatgpt-account-id", "")))
    if host == "play.googleapis.com" and bare.startswith("/log"):
        return json_reply(200, {"nextRequestWaitMillis": 15000})
    return None


def models(host: str) -> Reply:
    if host == "api.anthropic.com":
        data: list[dict[str, Any]] = [
            {"type": "model", "id": m, "display_name": m, "created_at": "2025-09-29T00:00:00Z"}
            for m in ANTHROPIC_MODELS
        ]
        return json_reply(200, {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]})
    if "googleapis.com" in host:
        return json_reply(
            200,
            {
                "models": [
                    {
                        "name": f"models/{m}",
                        "displayName": m,
                        "inputTokenLimit": 1048576,
                        "outputTokenLimit": 65536,
                        "supportedGenerationMethods": ["generateContent", "countTokens"],
                    }
                    for m in GEMINI_MODELS
                ]
            },
        )
    data = [{"id": m, "object": "model", "created": CREATED, "owned_by": "openai"} for m in OPENAI_MODELS]
    return json_reply(200, {"object": "list", "data": data})


def claude_code(path: str) -> dict[str, Any]:
    if path == "/api/event_logging/v2/batch":
        return {}
    if _EVAL.match(path):  # GrowthBook remote evaluation: no flag set, the client's defaults hold
        return {"features": {}, "experiments": [], "dateUpdated": "2025-11-29T07:06:40Z"}
    if path == "/api/claude_code/policy_limits":  # the organization's restrictions: none
        return {"restrictions": {}}
    if path == "/api/claude_code/organizations/metrics_enabled":
        return {"metrics_logging_enabled": False}
    return {}


def codex(path: str, account: str) -> dict[str, Any]:
    if path == "/backend-api/wham/accounts/check":
        # Codex looks its selected workspace (the login's account id, sent as chatgpt-account-id) up in this list
        # and routes to the workspace's backend origin: without it, "selected workspace missing from routing
        # discovery" and no turn starts
        entry = {
            "id": account or "feabea59-ebc0-4d8d-bc9d-79ccbb36b92f",
            "workspace_backend_origin": "https://chatgpt.com",
            "account_routing_override": "NO_CONSTRAINT",  # the default route: no override header
            "plan_type": "plus",
            "structure": "personal",
            "account_user_role": "account-owner",
        }
        return {"accounts": [entry], "account_ordering": [entry["id"]], "default_account_id": entry["id"]}
    if path == "/backend-api/codex/models":  # the remote model catalogue: none, Codex keeps its bundled list
        return {"models": []}
    if path == "/backend-api/wham/usage":
        return {
            "plan_type": "plus",
            "rate_limit": {
                "allowed": True,
                "limit_reached": False,
                "primary_window": {"used_percent": 12, "limit_window_seconds": 18000, "reset_after_seconds": 8040},
                "secondary_window": {"used_percent": 37, "limit_window_seconds": 604800, "reset_after_seconds": 412000},
            },
        }
    return {}
