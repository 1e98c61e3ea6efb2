"""Who called and who pays, from what the request shows: the client, the billing, agent ids.

Runs on the worker (record building). Pure: header values and the parsed request body in,
column values out. Credentials are looked at for their *shape* only and never kept.

- ``billing``: ``subscription`` for a plan credential (Claude's OAuth tokens ``sk-ant-oat…``,
  sent as a Bearer token) or a plan-only endpoint (ChatGPT-plan Codex, Gemini Code Assist,
  GitHub Copilot: :func:`llmtap.providers.is_plan_endpoint`); ``api`` for a metered
  credential (an API key, a cloud signature or token); ``''`` when the request carried none.
- Claude Code's ``metadata.user_id`` is a JSON string — ``{"device_id", "account_uuid",
  "session_id"}`` — or, before 2.x, ``user_<device>_account_<uuid>_session_<uuid>``: the user is
  the account (the device when the account is empty, as with an API key) and the session its
  ``session_id``, instead of the whole blob standing for the user.
- Gemini CLI names its session in the Code Assist body (``request.session_id``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..record import Billing

_LEGACY_CLAUDE_USER = re.compile(r"^user_([0-9a-f]{16,128})_account_([0-9a-f-]*)_session_([0-9a-f-]{8,64})$")
_CREDENTIALS = ("authorization", "x-api-key", "api-key", "x-goog-api-key")
_CREDENTIAL_QUERY = re.compile(r"(?:^|&)(?:key|api-key|api_key)=[^&]")


def billing(plan_endpoint: bool, headers: dict[str, str], query: str = "") -> Billing:
    if plan_endpoint:
        return "subscription"
    auth = headers.get("authorization", "")
    token = auth.split(" ", 1)[1].strip() if " " in auth else auth.strip()
    if token.startswith("sk-ant-oat"):
        return "subscription"  # a Claude Pro/Max OAuth token (Claude Code logged in with a plan)
    if any(headers.get(h) for h in _CREDENTIALS) or _CREDENTIAL_QUERY.search(query):
        return "api"
    return ""


def agent_user(user: str) -> tuple[str, str]:
    """(user_id, session_id) from an agent's composite user id; ``(user, "")`` for a plain one."""
    s = user.strip()
    if s.startswith("{"):
        try:
            obj: Any = json.loads(s)
        except ValueError:
            return user, ""
        if isinstance(obj, dict) and ({"device_id", "account_uuid", "session_id"} & obj.keys()):
            who = _str(obj.get("account_uuid")) or _str(obj.get("device_id"))
            return who[:256], _str(obj.get("session_id"))[:256]
        return user, ""
    m = _LEGACY_CLAUDE_USER.match(s)
    if m:
        device, account, session = m.groups()
        return (account or device)[:256], session
    return user, ""


def body_session(request: Any) -> str:
    """A session the request body names: Gemini Code Assist's ``request.session_id``."""
    if isinstance(request, dict):
        inner = request.get("request")
        if isinstance(inner, dict) and isinstance(inner.get("session_id"), str):
            return inner["session_id"][:256]
    return ""


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""
