"""The mock's knobs the demo leans on: ``x-mock-id`` gives a reply its own request and response ids (a provider
gives each call its own), and ``x-mock-events`` sets an Anthropic answer's length as it does an OpenAI stream's
(the output tokens reported are the text deltas sent, as Anthropic's ``message_delta`` usage counts them)."""

from __future__ import annotations

import json

import pytest

from llmtap.testing.mock.common import Reply, with_ids
from llmtap.testing.mock.server import plan

CALLS = [
    ("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o-mini", "stream": True}, "x-request-id"),
    ("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o-mini"}, "x-request-id"),
    ("api.openai.com", "/v1/responses", {"model": "gpt-4.1", "stream": True}, "x-request-id"),
    (
        "api.anthropic.com",
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 9},
        "request-id",
    ),
    ("api.anthropic.com", "/v1/messages", {"model": "claude-haiku-4-5", "max_tokens": 9}, "request-id"),
]


def _ids(reply: Reply, header: str) -> tuple[str, set[str]]:
    body = b"".join(reply.chunks).decode()
    ids = {m for m in ("chatcmpl-mock123", "msg_mock01", "resp_mock456") if m in body}
    return dict(reply.headers)[header], {body[body.index(i) : body.index(i) + len(i) + 7] for i in ids}


@pytest.mark.parametrize(("host", "path", "body", "header"), CALLS)
def test_each_call_gets_its_own_ids(host: str, path: str, body: dict[str, object], header: str) -> None:
    a = with_ids(plan(path, {"host": host}, {**body, "messages": []}), "a1b2c3")
    b = with_ids(plan(path, {"host": host}, {**body, "messages": []}), "d4e5f6")
    (ra, ida), (rb, idb) = _ids(a, header), _ids(b, header)
    assert ra.endswith("-a1b2c3") and rb.endswith("-d4e5f6") and ra != rb
    assert ida and all(i.endswith("-a1b2c3") for i in ida) and ida != idb
    assert with_ids(plan(path, {"host": host}, {**body, "messages": []}), "<>;").headers  # a bad tag changes nothing


def _anthropic(stream: bool, events: str) -> tuple[str, int]:
    body = {"model": "claude-sonnet-4-5", "stream": stream, "max_tokens": 1024, "messages": []}
    reply = plan("/v1/messages", {"host": "api.anthropic.com", "x-mock-events": events}, body)
    raw = b"".join(reply.chunks).decode()
    if not stream:
        msg = json.loads(raw)
        return msg["content"][0]["text"], msg["usage"]["output_tokens"]
    text, tokens = "", 0
    for line in raw.splitlines():
        if line.startswith("data: {"):
            ev = json.loads(line[6:])
            if ev["type"] == "content_block_delta":
                text += ev["delta"]["text"]
            if ev["type"] == "message_delta":
                tokens = ev["usage"]["output_tokens"]
    return text, tokens


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_answers_are_as_long_as_asked(stream: bool) -> None:
    text, tokens = _anthropic(stream, "240")
    assert tokens == 240 and len(text.split()) == 240
    assert _anthropic(stream, "")[1] == 7  # the default stays what the SDK tests expect
