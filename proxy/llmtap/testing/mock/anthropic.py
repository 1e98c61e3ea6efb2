"""Anthropic Messages."""

from __future__ import annotations

from typing import Any

from . import prompt_cache
from .common import ANTHROPIC_HEADERS, SSE_HEADERS, Reply, json_reply, shape, sse, words
from .jsonmode import dumps, forced_tool, pieces

# -- Anthropic ---------------------------------------------------------------------------------------


def anthropic_messages(body: dict[str, Any], scenario: str) -> Reply:
    model = body.get("model", "claude-sonnet-4-5")
    resp_model = "claude-sonnet-4-5-20250929" if model == "claude-sonnet-4-5" else model
    if scenario == "overloaded_529":
        return json_reply(
            529,
            {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
                "request_id": "req_mock_529",
            },
            [("request-id", "req_mock_529")],
        )
    if scenario == "credit_low":
        return json_reply(
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "Your credit balance is too low to access the Anthropic API. "
                    "Please go to Plans & Billing to upgrade or purchase credits.",
                },
                "request_id": "req_mock_400",
            },
        )
    usage = {
        "input_tokens": int(body.get("_mock_prompt_tokens", 28)),
        "cache_creation_input_tokens": 1200,
        "cache_read_input_tokens": 3400,
        "cache_creation": {"ephemeral_5m_input_tokens": 1200, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 1,
        "service_tier": "standard",
    }
    if scenario == "prompt_cache":  # usage from a simulated prompt cache (see .prompt_cache)
        usage = prompt_cache.usage(
            body, str(body.get("_mock_cache_scope", "")), float(body.get("_mock_cache_ttl", 300))
        )
    if isinstance(body.get("_mock_usage"), dict):  # x-mock-usage: the provider's usage fields to report
        usage = {**usage, **body["_mock_usage"]}
    text = words(int(body.get("_mock_events", 7)))  # x-mock-events: the output's length (the demo's sizes)
    forced = forced_tool(body)  # a tool the client forces (a router, a classifier): its input, as JSON
    if forced is not None:
        return _tool_use(body, forced, {**usage, "output_tokens": 7})
    msg: dict[str, Any] = {
        "id": "msg_mock01",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": resp_model,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    if not body.get("stream"):
        return json_reply(
            200,
            {
                **msg,
                "content": [{"type": "text", "text": "".join(text)}],
                "stop_reason": "end_turn",
                "usage": {**usage, "output_tokens": len(text)},
            },
            ANTHROPIC_HEADERS,
        )
    ev = [
        sse({"type": "message_start", "message": msg}, "message_start"),
        sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        ),
        sse({"type": "ping"}, "ping"),
    ]
    for i, t in enumerate(text):
        ev.append(
            sse(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
                "content_block_delta",
            )
        )
        if i == 2:
            ev.append(sse({"type": "ping"}, "ping"))
    if scenario == "cut_after_start":  # the connection drops after message_start and a few deltas
        return Reply(200, SSE_HEADERS + ANTHROPIC_HEADERS, ev[:6], abort=True)
    if scenario == "overloaded_mid_stream":
        ev = [*ev[:6], sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error")]
        return Reply(200, SSE_HEADERS + ANTHROPIC_HEADERS, ev)
    ev += [
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": len(text)},
            },
            "message_delta",
        ),
        sse({"type": "message_stop"}, "message_stop"),
    ]
    return shape(Reply(200, SSE_HEADERS + ANTHROPIC_HEADERS, ev), scenario)


def _tool_use(body: dict[str, Any], forced: tuple[str, dict[str, Any]], usage: dict[str, Any]) -> Reply:
    name, value = forced
    model = body.get("model", "claude-sonnet-4-5")
    block = {"type": "tool_use", "id": "toolu_mock01", "name": name, "input": value}
    msg: dict[str, Any] = {
        "id": "msg_mock01",
        "type": "message",
        "role": "assistant",
        "content": [block],
        "model": model,
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": usage,
    }
    if not body.get("stream"):
        return json_reply(200, msg, ANTHROPIC_HEADERS)
    start = {**msg, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    ev = [
        sse({"type": "message_start", "message": start}, "message_start"),
        sse(
            {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}},
            "content_block_start",
        ),
    ]
    for piece in pieces(dumps(value), 4):
        delta = {"type": "input_json_delta", "partial_json": piece}
        ev.append(sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"))
    ev += [
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
            "message_delta",
        ),
        sse({"type": "message_stop"}, "message_stop"),
    ]
    return Reply(200, SSE_HEADERS + ANTHROPIC_HEADERS, ev)
