"""The mock answers what the agents and the official SDKs send as the real APIs do (issue #31).

Expected shapes come from the recordings (``tests/corpus/openai/responses_stream_text.sse``, its PROVENANCE row),
the requests' own schemas (a JSON-mode answer must be an instance of the schema the request gave: Gemini CLI's
router schema below is the one Gemini CLI 0.61.0 sent) and the agents' observed requests, never from llmtap.
"""

from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest

from llmtap.testing.mock.server import plan, special
from llmtap.testing.mock.websocket import Socket
from llmtap.testing.mock.ws_responses import ResponsesSession

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "openai"


def events(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: {")]


def kinds(evs: list[dict[str, Any]]) -> list[str]:
    """The event types, each run of deltas as one (the recording's text is longer than the mock's)."""
    return [k for k, _ in groupby(str(e["type"]) for e in evs)]


def sse(host: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return events(b"".join(plan(path, {"host": host, **(headers or {})}, body).chunks))


def reply_json(host: str, path: str, body: dict[str, Any]) -> Any:
    return json.loads(b"".join(plan(path, {"host": host}, body).chunks))


def ws_events(create: dict[str, Any]) -> list[dict[str, Any]]:
    steps = ResponsesSession(Socket("/v1/responses", {}, 0.0, "")).on_message(create)
    return [s.message for s in steps]


RECORDED = kinds(events((CORPUS / "responses_stream_text.sse").read_bytes()))


def test_the_recorded_responses_stream_has_the_full_sequence() -> None:
    """The premise: what the real API streams for one text message."""
    assert RECORDED == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]


def test_the_mock_streams_the_recorded_sequence_over_sse_and_websocket() -> None:
    over_sse = sse("api.openai.com", "/v1/responses", {"model": "gpt-4.1", "input": "hi", "stream": True})
    over_ws = ws_events({"type": "response.create", "model": "gpt-4.1", "input": "hi"})
    for evs in (over_sse, over_ws):
        assert kinds(evs) == RECORDED
        assert [e["sequence_number"] for e in evs] == list(range(len(evs)))
        text = "".join(e["delta"] for e in evs if e["type"] == "response.output_text.delta")
        done = next(e for e in evs if e["type"] == "response.output_text.done")
        item = next(e for e in evs if e["type"] == "response.output_item.done")["item"]
        final = evs[-1]["response"]
        assert done["text"] == text == item["content"][0]["text"] == final["output"][0]["content"][0]["text"]
        assert item["status"] == "completed" and final["output"] == [item]


def test_a_warmup_create_generates_nothing_and_reports_only_what_it_carried() -> None:
    """``"generate": false`` (Codex's prewarm, as Codex 0.171.0 sent it: no instructions, ``input: []``)."""
    prewarm = {"type": "response.create", "model": "gpt-5-codex", "input": [], "generate": False, "stream": True}
    evs = ws_events(prewarm)
    assert kinds(evs) == ["response.created", "response.completed"]
    usage = evs[-1]["response"]["usage"]
    assert evs[-1]["response"]["output"] == [] and usage["output_tokens"] == 0 and usage["input_tokens"] == 0
    carrying = ws_events({**prewarm, "instructions": "You are Codex. " * 100})
    assert carrying[-1]["response"]["usage"]["input_tokens"] > 0  # its own input, not the turn's usage
    turn = ws_events({"type": "response.create", "model": "gpt-5-codex", "input": "fix it"})
    assert turn[-1]["response"]["usage"]["output_tokens"] > 0


# Gemini CLI 0.61.0's model router (NumericalClassifierStrategy), as sent
ROUTER_SCHEMA = {
    "type": "OBJECT",
    "properties": {
        "complexity_reasoning": {"type": "STRING", "description": "Brief explanation for the score."},
        "complexity_score": {"type": "INTEGER", "description": "Complexity score from 1-100."},
    },
    "required": ["complexity_reasoning", "complexity_score"],
}


@pytest.mark.parametrize("path", [":generateContent", ":streamGenerateContent?alt=sse"])
def test_gemini_json_mode_answers_an_instance_of_the_schema(path: str) -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "Say hi"}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": ROUTER_SCHEMA},
    }
    url = "/v1beta/models/gemini-2.5-flash-lite" + path
    if "stream" in path:
        parts = sse("generativelanguage.googleapis.com", url, body)
        text = "".join(p["text"] for c in parts for p in c["candidates"][0]["content"]["parts"])
    else:
        whole = reply_json("generativelanguage.googleapis.com", url, body)
        text = whole["candidates"][0]["content"]["parts"][0]["text"]
    answer = json.loads(text)
    assert set(answer) == set(ROUTER_SCHEMA["required"])
    assert isinstance(answer["complexity_reasoning"], str) and isinstance(answer["complexity_score"], int)
    assert 1 <= answer["complexity_score"] <= 100
    plain = reply_json("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.5-flash:generateContent", {})
    with pytest.raises(ValueError):  # no JSON asked for: prose
        json.loads(plain["candidates"][0]["content"]["parts"][0]["text"])


SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["bug", "feature"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
        "note": {"type": ["string", "null"]},
    },
    "required": ["label", "confidence", "tags", "note"],
    "additionalProperties": False,
}


def valid(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == set(SCHEMA["required"])  # type: ignore[arg-type]
        and value["label"] in ("bug", "feature")
        and 0 <= value["confidence"] <= 1
        and isinstance(value["tags"], list)
        and all(isinstance(t, str) for t in value["tags"])
        and (value["note"] is None or isinstance(value["note"], str))
    )


def test_openai_json_modes_answer_json() -> None:
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "classify"}]}
    fmt = {"type": "json_schema", "json_schema": {"name": "c", "strict": True, "schema": SCHEMA}}
    got = reply_json("api.openai.com", "/v1/chat/completions", {**chat, "response_format": fmt})
    assert valid(json.loads(got["choices"][0]["message"]["content"]))
    streamed = sse("api.openai.com", "/v1/chat/completions", {**chat, "response_format": fmt, "stream": True})
    assert valid(json.loads("".join(c["choices"][0]["delta"].get("content") or "" for c in streamed if c["choices"])))
    obj = reply_json("api.openai.com", "/v1/chat/completions", {**chat, "response_format": {"type": "json_object"}})
    assert isinstance(json.loads(obj["choices"][0]["message"]["content"]), dict)
    text = {"format": {"type": "json_schema", "name": "c", "strict": True, "schema": SCHEMA}}
    resp = reply_json("api.openai.com", "/v1/responses", {"model": "gpt-4.1", "input": "classify", "text": text})
    assert valid(json.loads(resp["output"][0]["content"][0]["text"]))


def test_a_forced_anthropic_tool_is_called_with_input_of_its_schema() -> None:
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "classify"}],
        "tools": [{"name": "other", "input_schema": {"type": "object"}}, {"name": "classify", "input_schema": SCHEMA}],
        "tool_choice": {"type": "tool", "name": "classify"},
    }
    msg = reply_json("api.anthropic.com", "/v1/messages", body)
    (block,) = msg["content"]
    assert (msg["stop_reason"], block["type"], block["name"]) == ("tool_use", "tool_use", "classify")
    assert valid(block["input"])
    evs = sse("api.anthropic.com", "/v1/messages", {**body, "stream": True})
    partial = "".join(e["delta"]["partial_json"] for e in evs if e["type"] == "content_block_delta")
    assert valid(json.loads(partial)) and evs[-2]["delta"]["stop_reason"] == "tool_use"


def other(method: str, host: str, path: str, **headers: str) -> tuple[int, Any]:
    reply = special(method, path, {"host": host, **headers}, b"", {})
    if reply is None:
        reply = plan(path, {"host": host, **headers}, {})
    return reply.status, json.loads(b"".join(reply.chunks))


def test_model_listings_in_each_apis_shape() -> None:
    status, body = other("GET", "api.openai.com", "/v1/models")
    assert status == 200 and body["object"] == "list" and all(m["object"] == "model" for m in body["data"])
    status, body = other("GET", "api.anthropic.com", "/v1/models")
    assert status == 200 and body["has_more"] is False and body["data"][0]["type"] == "model"
    status, body = other("GET", "generativelanguage.googleapis.com", "/v1beta/models?key=k")
    assert status == 200 and body["models"][0]["name"].startswith("models/")


@pytest.mark.parametrize(
    ("method", "host", "path"),
    [  # what Claude Code 2.1.332 and Codex 0.171.0 called besides their model calls
        ("POST", "api.anthropic.com", "/api/event_logging/v2/batch"),
        ("POST", "api.anthropic.com", "/api/eval/sdk-zAZezfDKGoZuXXKe"),
        ("GET", "api.anthropic.com", "/api/claude_cli/bootstrap?entrypoint=sdk-cli&model=claude-sonnet-4-5"),
        ("GET", "api.anthropic.com", "/api/claude_code/policy_limits"),
        ("GET", "api.anthropic.com", "/api/claude_code/settings"),
        ("POST", "chatgpt.com", "/backend-api/codex/analytics-events/events"),
        ("GET", "chatgpt.com", "/backend-api/codex/models?client_version=0.171.0"),
        ("GET", "chatgpt.com", "/backend-api/plugins/export/curated"),
    ],
)
def test_the_agents_other_requests_succeed(method: str, host: str, path: str) -> None:
    status, body = other(method, host, path)
    assert status == 200 and isinstance(body, dict)


def test_codex_finds_its_workspace_in_the_account_check() -> None:
    account = "0d5bd1c4-7f7e-4f55-9f4c-1f8f3c7a2b10"
    status, body = other("GET", "chatgpt.com", "/backend-api/wham/accounts/check", **{"chatgpt-account-id": account})
    assert status == 200
    (entry,) = [a for a in body["accounts"] if a["id"] == account]  # else: "selected workspace missing"
    assert entry["workspace_backend_origin"].startswith("https://")
    assert other("POST", "chatgpt.com", "/backend-api/f/conversation")[0] == 404  # ChatGPT's web app: not Codex's
