"""Rate-limit and quota headers kept verbatim (names lower-cased), nothing else."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from llmtap.adapters import route
from llmtap.capture import Capture, End, RequestFacts, build
from llmtap.capture.headers import MAX_RATELIMIT_HEADERS, ratelimit_headers, to_float, to_int
from llmtap.record import CallRecord
from llmtap.safetext import safe_text
from llmtap.store import rowbinary
from llmtap.telemetry.semconv import otel_traces_row, span_attributes
from llmtap.testing import mock


def record_with(extra: list[tuple[str, str]]) -> CallRecord:
    """A chat completion whose response carries ``extra`` headers too, built as the worker builds it."""
    path, body = "/v1/chat/completions", {"model": "gpt-4o", "messages": []}
    reply = mock.plan(path, {}, body)
    match = route("POST", "api.openai.com", path, frozenset())
    assert match is not None
    now = time.monotonic()
    facts = RequestFacts("POST", "api.openai.com", 443, path, [], json.dumps(body).encode(), time.time(), now,
                         match.provider, match.api, trace_id="a" * 32, span_id="b" * 16)  # fmt: skip
    cap = Capture(facts, match.adapter())
    cap.on_response_headers(reply.status, [*reply.headers, *extra], now + 0.001)
    for chunk in [*reply.chunks, b""]:
        cap.tee(chunk)
    return build(cap, End("complete", time.monotonic()), None)[0]


def encode_attribute(v: Any) -> None:
    if isinstance(v, bool):
        AnyValue(bool_value=v).SerializeToString()
    elif isinstance(v, int):
        AnyValue(int_value=v).SerializeToString()
    elif isinstance(v, float):
        AnyValue(double_value=v).SerializeToString()
    elif isinstance(v, str):
        AnyValue(string_value=v).SerializeToString()
    else:
        for x in v:
            encode_attribute(x)


def test_every_rate_limit_family_is_kept_and_nothing_else() -> None:
    headers = [
        ("x-ratelimit-remaining-requests", "4999"),
        ("x-ratelimit-limit-tokens-usage-based", "1000000"),
        ("anthropic-ratelimit-tokens-remaining", "39000"),
        ("anthropic-ratelimit-unified-5h-utilization", "0.42"),
        ("anthropic-ratelimit-unified-status", "allowed_warning"),
        ("retry-after", "7"),
        ("retry-after-ms", "6500"),
        ("x-codex-primary-used-percent", "12.5"),
        ("x-codex-secondary-reset-after-seconds", "412000"),
        ("RateLimit-Policy", "100;w=60"),
        ("x-request-id", "req_1"),
        ("anthropic-organization-id", "org"),
        ("x-codex-turn-state", "opaque"),
        ("set-cookie", "a=b"),
    ]
    got = ratelimit_headers(headers)
    assert set(got) == {k.lower() for k, _ in headers[:10]}
    assert got["anthropic-ratelimit-unified-status"] == "allowed_warning" and got["ratelimit-policy"] == "100;w=60"
    many = [(f"x-ratelimit-n{i}", "1") for i in range(200)]
    assert len(ratelimit_headers(many)) == MAX_RATELIMIT_HEADERS


@pytest.mark.parametrize(
    "name, value",
    [
        ("x-ratelimit-remaining-requests", "1e309"),
        ("x-ratelimit-remaining-requests", "NaN"),
        ("x-ratelimit-remaining-tokens", "-inf"),
        ("x-ratelimit-remaining-requests", "1e30"),  # finite, but no Int64 holds it (nor an OTLP int)
        ("x-ratelimit-remaining-requests", "9" * 5000),  # past Python's int-from-string limit
        ("x-ratelimit-remaining-tokens", "١٢٣"),  # digits, not ASCII ones
        ("openai-processing-ms", "nan"),
        ("retry-after-ms", "inf"),
        ("retry-after", "nan"),
        ("retry-after", "Mon, 01 Jan 99999 00:00:00 GMT"),
        ("content-length", "²"),  # str.isdigit() says yes, int() says no
        ("content-length", "9" * 5000),
        ("x-request-id", "req-\udcff\udcfe"),  # bytes that were not UTF-8, as mitmproxy hands them over
        ("x-ratelimit-reset-requests", "\ud800"),
    ],
)
def test_any_header_value_leaves_a_whole_record_that_every_sink_can_write(name: str, value: str) -> None:
    """Issue #26: a number no column can hold raised while the record was built, and the call was lost."""
    rec = record_with([(name, value)])
    assert rec.ratelimit_remaining_requests in (None, 4999) and rec.ratelimit_remaining_tokens in (None, 159000)
    for v in (rec.provider_processing_ms, rec.retry_after_s):
        assert v is None or math.isfinite(v)
    row = otel_traces_row(rec)
    rowbinary.encode(row)  # the store's row
    for v in span_attributes(rec).values():  # the OTLP span: protobuf refuses surrogates and ints past Int64
        encode_attribute(v)
    assert all(s.encode("utf-8") for s in (rec.request_id, *rec.ratelimit_headers, *rec.ratelimit_headers.values()))


def test_numbers_in_range_are_kept_exactly() -> None:
    assert to_int("9223372036854775807") == 2**63 - 1 and to_int("9223372036854775808") is None
    assert to_int(" 42 ") == 42 and to_int("12.9") == 12 and to_int("-3") == -3 and to_int("") is None
    assert to_float("6500") == 6500.0 and to_float("1e308") == 1e308 and to_float("1e309") is None
    assert safe_text("été") == "été" and safe_text("\udcc3\udca9") == "é" and safe_text("a\ud800") == "a\ufffd"
