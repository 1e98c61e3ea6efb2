"""Test builders, shipped as mitmproxy ships ``mitmproxy.test.tflow``: a call captured from bytes, and a
sample record.

- :func:`capture` starts a call the way the proxy does (routed by :func:`llmtap.adapters.route`, the
  request body handed over, the model taken from the path when the body names none), :func:`respond`
  hands it a response (headers, then each piece through the tee, which must give it back unchanged)
  and :func:`finish` builds its record. :func:`record` does all three; :func:`mock_record` answers the
  call with the mock provider's reply (:func:`llmtap.testing.mock.plan`).
- :func:`sample_record` is a record with every column set to something other than its default.

This module is the one place tests drive :class:`llmtap.capture.Capture`: when its API changes, only
this module follows.
"""

from __future__ import annotations

import dataclasses
import json
import time
import typing
from collections.abc import Iterable, Sequence
from typing import Any

from ..adapters import RouteMatch, route
from ..capture import CallContext, Capture, End, RequestFacts, TokenEstimator, build
from ..capture.estimate import Encoding
from ..capture.tee import ParseErrorHook
from ..record import NOT_COLUMNS, CallRecord, EndKind

TRACE_ID, SPAN_ID = "a" * 32, "b" * 16


def _offline(name: str) -> Encoding:
    raise OSError("offline")


OFFLINE = TokenEstimator(loader=_offline)
"""A token estimator that never fetches an encoding: estimates are the byte heuristic."""


def route_of(path: str, host: str = "api.openai.com", method: str = "POST", headers: Iterable[str] = ()) -> RouteMatch:
    match = route(method, host, path, frozenset(headers))
    assert match is not None, f"{method} {host}{path} is not routed"
    return match


def capture(
    path: str,
    body: Any = b"",
    *,
    host: str = "api.openai.com",
    method: str = "POST",
    request_headers: Iterable[str] = (),
    on_parse_error: ParseErrorHook | None = None,
) -> Capture:
    """A call to ``host`` + ``path`` as the proxy starts capturing it. ``body``: the request body's bytes,
    or a value sent as JSON; ``request_headers``: the header names it carried (routing reads some)."""
    match = route_of(path, host, method, request_headers)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    facts = RequestFacts(
        method=method,
        host=host,
        port=443,
        path=path,
        headers=[],
        body=raw,
        start_wall=time.time(),
        start_mono=time.monotonic(),
        provider=match.provider,
        api=match.api,
        trace_id=TRACE_ID,
        span_id=SPAN_ID,
    )
    cap = Capture(facts, match.adapter(), on_parse_error)
    if match.model and not cap.adapter.req.model:  # as the addon does: the model named in the path
        cap.adapter.req.model = match.model
    return cap


def split(data: bytes, cuts: Iterable[int] | None) -> list[bytes]:
    """``data`` cut at ``cuts`` (taken modulo its length; none: one piece)."""
    points = sorted({c % (len(data) + 1) for c in (cuts or [])})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def respond(
    cap: Capture, status: int, headers: Sequence[tuple[str, str]], pieces: Iterable[bytes], after: float = 0.0
) -> Capture:
    """The response: its headers ``after`` seconds after the request started, then each piece through the
    tee as it arrives (the tee must hand every byte back unchanged)."""
    cap.on_response_headers(status, list(headers), cap.facts.start_mono + after)
    for piece in pieces:
        assert cap.tee(piece) == piece
    return cap


def finish(
    cap: Capture, end: EndKind = "complete", message: str = "", estimator: TokenEstimator | None = OFFLINE
) -> tuple[CallRecord, CallContext]:
    """The call's end (``end``: how its transport ended) and what the worker makes of it."""
    return build(cap, End(end, time.monotonic(), message), estimator)


def record(
    path: str,
    body: Any,
    status: int,
    headers: Sequence[tuple[str, str]],
    pieces: Iterable[bytes],
    *,
    host: str = "api.openai.com",
    method: str = "POST",
    request_headers: Iterable[str] = (),
    after: float = 0.0,
    end: EndKind = "complete",
) -> CallRecord:
    """The record of a whole call: :func:`capture`, :func:`respond`, :func:`finish`."""
    cap = capture(path, body, host=host, method=method, request_headers=request_headers)
    return finish(respond(cap, status, headers, pieces, after), end)[0]


def mock_record(
    path: str,
    body: dict[str, Any],
    scenario: str = "",
    cuts: list[int] | None = None,
    host: str = "api.openai.com",
    end: EndKind = "complete",
) -> CallRecord:
    """The record of a call the mock provider answers (scenario ``scenario``), its body cut at ``cuts``."""
    from .mock import plan

    reply = plan(path, {"x-mock-scenario": scenario} if scenario else {}, body)
    headers = ("anthropic-version",) if "messages" in path else ()
    pieces = split(b"".join(reply.chunks), cuts)
    return record(
        path, body, reply.status, reply.headers, pieces, host=host, request_headers=headers, after=0.001, end=end
    )


# -- a sample record ----------------------------------------------------------------------------------

SAMPLE: dict[str, Any] = {
    "timestamp": 1795950880.123456,
    "trace_id": "ab" * 16,
    "span_id": "cd" * 8,
    "service": "checkout",
    "provider": "openai",
    "api": "openai.chat_completions",
    "operation": "chat",
    "server_address": "api.openai.com",
    "server_port": 443,
    "request_model": "gpt-4o",
    "response_model": "gpt-4o-2024-08-06",
    "request_id": "req_1",
    "response_id": "chatcmpl-1",
    "stream": True,
    "status_code": 200,
    "outcome": "error",
    "error_type": "rate_limited",
    "error_code": "rate_limit_exceeded",
    "error_message": "slow down ☃",
    "mid_stream_error": True,
    "finish_reason": "error",
    "finish_reason_raw": "",
    "input_tokens": 2048,
    "output_tokens": 96,
    "cache_read_tokens": 1024,
    "cache_write_tokens": 12,
    "reasoning_tokens": 64,
    "usage_source": "provider",
    "cost_usd": 0.0123,
    "input_cost_usd": 0.01,
    "output_cost_usd": 0.0023,
    "ttfb_ms": 101.5,
    "ttft_ms": 250.25,
    "duration_ms": 1234.5,
    "decode_ms": 900.125,
    "itl_p50_ms": 10.5,
    "itl_p95_ms": 30.75,
    "itl_max_ms": 120.0,
    "output_tokens_per_s": 106.6,
    "provider_processing_ms": 42.0,
    "content_events": 80,
    "tool_calls": 2,
    "max_output_tokens": 4096,
    "retry_after_s": 11.054,
    "ratelimit_remaining_requests": 4999,
    "ratelimit_remaining_tokens": -1,
    "request_bytes": 1000,
    "response_bytes": 20000,
    "user_id": "u",
    "session_id": "s",
    "tenant": "t",
    "feature": "f",
    "prompt_version": "v2",
    "api_key_id": "0123abcd",
    "request_hash": "ff" * 16,
    "transport": "websocket",
    "connection_id": "conn-1",
    "service_tier": "flex",
    "request_service_tier": "auto",
    "cache_write_1h_tokens": 7,
    "cost_source": "genai-prices:model",
    "price_version": "0.0.40",
    "billing": "subscription",
    "client_name": "claude-code",
    "client_version": "2.0.14",
    "ratelimit_headers": {"anthropic-ratelimit-unified-status": "allowed", "retry-after": "3"},
    "attempt": 3,
    "cache_miss_reason": "tools_changed",
    "cache_miss_cost_usd": 0.0042,
    "overhead_ms": 0.25,
    "batch_id": "batch_abc",
    "uncached_input_cost_usd": 0.02,
    "server_tool_calls": {"web_search": 2, "web_fetch": 1},
    "tool_cost_usd": 0.02,
}
"""Realistic values for the columns; a column not named here gets one made up from its type."""


def made_up(name: str, kind: Any, default: Any, n: int = 1) -> Any:
    """A value of type ``kind`` other than ``default`` (the ``n``-th column made up: numbers differ)."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) is typing.Literal or (args and all(isinstance(a, str) for a in args)):
        literals = [v for a in args for v in (typing.get_args(a) or (a,))]
        return next(v for v in literals if v != default)
    if args and typing.get_origin(kind) is not dict:  # X | None: an X
        return made_up(name, args[0], default, n)
    if typing.get_origin(kind) is dict:
        return {f"{name}-key": f"{name}-value"}
    if kind is bool:
        return not default
    if kind is int:
        return 100 + n
    if kind is float:
        return 0.5 + n
    return f"{name}-{n}"


def sample_record(**changes: Any) -> CallRecord:
    """A record with every column set to something other than its default: :data:`SAMPLE`, and for a
    column :data:`SAMPLE` does not name yet, a value made up from its type (:func:`made_up`)."""
    hints = typing.get_type_hints(CallRecord)
    values = dict(SAMPLE)
    for n, f in enumerate(dataclasses.fields(CallRecord)):
        if f.name not in values and f.name not in NOT_COLUMNS:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            values[f.name] = made_up(f.name, hints[f.name], default, n)
    return dataclasses.replace(CallRecord(**values), **changes)


__all__ = [
    "OFFLINE",
    "SAMPLE",
    "capture",
    "finish",
    "made_up",
    "mock_record",
    "record",
    "respond",
    "route_of",
    "sample_record",
    "split",
]
