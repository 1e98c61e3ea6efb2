"""OpenAI Chat Completions adapter."""

from __future__ import annotations

import json
import time
from typing import Any

from llmtap.adapters import route
from llmtap.capture import Capture, End, RequestFacts, build
from llmtap.capture.estimate import TokenEstimator
from llmtap.testing import mock

OFFLINE = TokenEstimator(loader=lambda name: (_ for _ in ()).throw(OSError("offline")))


def run_capture(
    path: str,
    body: dict[str, Any],
    scenario: str,
    cuts: list[int] | None = None,
    host: str = "api.openai.com",
    end_kind: str = "complete",
) -> Any:
    reply = mock.plan(path, {"x-mock-scenario": scenario} if scenario else {}, body)
    match = route("POST", host, path, frozenset({"anthropic-version"} if "messages" in path else set()))
    assert match is not None
    api = match.api
    raw_body = json.dumps(body).encode()
    now = time.monotonic()
    facts = RequestFacts(
        method="POST",
        host=host,
        port=443,
        path=path,
        headers=[],
        body=raw_body,
        start_wall=time.time(),
        start_mono=now,
        provider=match.provider,
        api=api,
        trace_id="a" * 32,
        span_id="b" * 16,
    )
    cap = Capture(facts, match.adapter())
    cap.on_response_headers(reply.status, [(k, v) for k, v in reply.headers], now + 0.001)
    data = b"".join(reply.chunks)
    points = sorted({c % (len(data) + 1) for c in (cuts or [])})
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        assert cap.tee(data[a:b]) == data[a:b]
    cap.tee(b"")
    return build(cap, End(end_kind, time.monotonic()), OFFLINE)[0]


def test_openai_usage_chunk_with_empty_choices_is_not_content() -> None:
    r = run_capture(
        "/v1/chat/completions",
        {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}},
        "default",
    )
    assert r.content_events == 8 and r.usage_source == "provider" and (r.input_tokens, r.output_tokens) == (31, 8)
