"""A call the provider may have billed never has zero usage: input from the request, output as seen,
``usage_source`` partial (part is the provider's) or estimated (none is); a call that never reached
the provider, or that it refused, has none."""

from __future__ import annotations

from typing import Any

import pytest

from llmtap.testing import builders, mock

PROMPT = {"role": "user", "content": "tell me about the lighthouse keeper and the storm " * 20}


def capture(
    path: str,
    body: dict[str, Any],
    scenario: str,
    end: str,
    chunks: int | None = None,
    status: int | None = None,
    message: str = "",
) -> Any:
    host = "api.anthropic.com" if "messages" in path else "api.openai.com"
    cap = builders.capture(path, body, host=host, request_headers=("anthropic-version",) if "messages" in path else ())
    if status != 0:
        reply = mock.plan(path, {"x-mock-scenario": scenario} if scenario else {}, body)
        builders.respond(cap, status or reply.status, reply.headers, reply.chunks[:chunks])
    return builders.finish(cap, end, message)[0]  # type: ignore[arg-type]


def test_anthropic_stream_cut_after_message_start_is_partial() -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "stream": True, "messages": [PROMPT]}
    r = capture("/v1/messages", body, "cut_after_start", "upstream_error")
    assert r.outcome == "error" and r.usage_source == "partial"
    assert r.input_tokens == 28 + 1200 + 3400  # message_start's (the provider's own)
    assert r.output_tokens > 1  # counted from the text seen, not message_start's placeholder 1


def test_cancelled_openai_stream_without_usage_is_estimated_from_the_request() -> None:
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [PROMPT]}
    r = capture("/v1/chat/completions", body, "", "client_disconnected", chunks=3)
    assert r.outcome == "cancelled" and r.usage_source == "estimated"
    assert r.input_tokens > 100 and r.output_tokens > 0 and r.usage_estimator


def test_a_timeout_after_the_request_was_sent_is_estimated() -> None:
    body = {"model": "gpt-4o-mini", "messages": [PROMPT]}
    r = capture("/v1/chat/completions", body, "", "upstream_error", status=0)
    assert r.status_code == 0 and r.usage_source == "estimated" and r.input_tokens > 100


@pytest.mark.parametrize("scenario", ["rate_limit_429", "quota_429"])
def test_refused_calls_have_no_usage(scenario: str) -> None:
    body = {"model": "gpt-4o-mini", "messages": [PROMPT]}
    r = capture("/v1/chat/completions", body, scenario, "complete")
    assert r.status_code == 429 and r.usage_source == "none" and r.input_tokens == 0 and r.cost_usd is None


def test_a_request_that_never_reached_the_provider_has_no_usage() -> None:
    body = {"model": "gpt-4o-mini", "messages": [PROMPT]}
    r = capture("/v1/chat/completions", body, "", "upstream_error", status=0, message="[Errno 111] Connect call failed")
    assert r.usage_source == "none" and r.input_tokens == 0
