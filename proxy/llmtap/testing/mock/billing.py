"""The providers' cost reports, for ``llmtap reconcile --admin-key``: two pages each (yesterday, today).

OpenAI ``GET /v1/organization/costs`` (``Authorization: Bearer <admin key>``): a page of daily
buckets ``{"object": "bucket", "start_time", "end_time", "results": [{"object":
"organization.costs.result", "amount": {"value", "currency"}, "line_item", "project_id"}]}``,
``has_more`` and ``next_page`` (passed back as ``page``). Anthropic ``GET
/v1/organizations/cost_report`` (``x-api-key``, ``anthropic-version``): buckets ``{"starting_at",
"ending_at", "results": [{"amount" (cents, a decimal string), "currency", "cost_type",
"description", "model", "service_tier", "token_type", "context_window", "workspace_id"}]}``.
Shapes: the API references' example responses (see tests/unit/cli/fixtures/billing/PROVENANCE.md).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from .common import Reply, json_reply

# Billed per page: (line item or (model, description, token type), amount). Page 1 is yesterday, page 2 today.
OPENAI_PAGES: list[list[tuple[str, float]]] = [
    [("gpt-4o-mini-2024-07-18, input", 0.06), ("gpt-4o-mini-2024-07-18, output", 0.02)],
    [("gpt-4o-2024-08-06, input", 0.04), ("gpt-4o-2024-08-06, output", 0.01)],
]
ANTHROPIC_PAGES: list[list[tuple[str, str, str, str]]] = [  # model, description, token type, amount in cents
    [("claude-opus-5", "Claude Opus 5 Usage - Input Tokens", "uncached_input_tokens", "123.78912")],
    [("claude-sonnet-4-5-20250929", "Claude Sonnet 4.5 Usage - Input Tokens", "uncached_input_tokens", "2.5")],
]


def _day(offset: int) -> int:
    today = int(time.time()) // 86400 * 86400
    return today + offset * 86400


def _rfc3339(t: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _page(query: str) -> int:
    page = (parse_qs(query).get("page") or [""])[0]
    return 1 if page == "page_2" else 0


def openai_costs(path: str, headers: dict[str, str]) -> Reply:
    if not headers.get("authorization", "").startswith("Bearer "):
        return json_reply(401, {"error": {"message": "Missing admin key", "type": "invalid_request_error"}})
    i = _page(path.partition("?")[2])
    start = _day(i - 1)
    bucket = {
        "object": "bucket",
        "start_time": start,
        "end_time": start + 86400,
        "results": [
            {
                "object": "organization.costs.result",
                "amount": {"value": value, "currency": "usd"},
                "line_item": item,
                "project_id": None,
            }
            for item, value in OPENAI_PAGES[i]
        ],
    }
    last = i == len(OPENAI_PAGES) - 1
    return json_reply(
        200, {"object": "page", "data": [bucket], "has_more": not last, "next_page": None if last else "page_2"}
    )


def anthropic_cost_report(path: str, headers: dict[str, str]) -> Reply:
    if not headers.get("x-api-key") or not headers.get("anthropic-version"):
        return json_reply(401, {"type": "error", "error": {"type": "authentication_error", "message": "x-api-key"}})
    i = _page(path.partition("?")[2])
    start = _day(i - 1)
    results: list[dict[str, Any]] = [
        {
            "amount": amount,
            "context_window": "0-200k",
            "cost_type": "tokens",
            "currency": "USD",
            "description": desc,
            "inference_geo": "global",
            "model": model,
            "service_tier": "standard",
            "token_type": token_type,
            "workspace_id": "wrkspc_01JwQvzr7rXLA5AGx3HKfFUJ",
        }
        for model, desc, token_type, amount in ANTHROPIC_PAGES[i]
    ]
    last = i == len(ANTHROPIC_PAGES) - 1
    return json_reply(
        200,
        {
            "data": [{"starting_at": _rfc3339(start), "ending_at": _rfc3339(start + 86400), "results": results}],
            "has_more": not last,
            "next_page": None if last else "page_2",
        },
    )
