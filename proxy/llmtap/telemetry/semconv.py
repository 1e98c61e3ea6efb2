"""The span contract: a :class:`CallRecord` ↔ OTel GenAI span attributes ↔ an ``otel_traces`` row.

Attribute names follow the OTel GenAI conventions (v1.41) where one exists and
``llmtap.<column>`` for every other ``llm_calls`` column, so the row can be rebuilt
from the span alone (the materialized view in ``collector/schema.sql`` does that).
Values in ``otel_traces`` are stringified exactly as the Collector's ClickHouse
exporter does (pcommon ``Value.AsString``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from .. import SCOPE_NAME, __version__
from ..record import SPAN_ONLY, CallRecord

# column → attribute name, for columns with an OTel semantic-convention name.
SEMCONV: dict[str, str] = {
    "provider": "gen_ai.provider.name",
    "operation": "gen_ai.operation.name",
    "request_model": "gen_ai.request.model",
    "response_model": "gen_ai.response.model",
    "response_id": "gen_ai.response.id",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
    "stream": "gen_ai.request.stream",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "server_address": "server.address",
    "server_port": "server.port",
    "error_type": "error.type",
    "status_code": "http.response.status_code",
}
# Columns carried by the span itself rather than by an attribute.
SPAN_FIELDS = frozenset({"timestamp", "trace_id", "span_id", "service", "duration_ms"})
# Empty values are omitted (the view reads a missing key as ''), None is omitted (→ NULL).
OMIT_EMPTY = frozenset(
    {
        "error_type",
        "response_model",
        "response_id",
        "connection_id",
        "service_tier",
        "request_service_tier",
        "cost_source",
        "price_version",
        "billing",
        "client_name",
        "client_version",
        "ratelimit_headers",
        "server_tool_calls",
        "cache_miss_reason",
        "batch_id",
    }
)


# Span-only fields (record.SPAN_ONLY) with a GenAI name; the others are ``llmtap.<field>``.
SPAN_ONLY_SEMCONV: dict[str, str] = {
    "input_messages": "gen_ai.input.messages",
    "output_messages": "gen_ai.output.messages",
}


def attribute_name(column: str) -> str:
    return SEMCONV.get(column) or SPAN_ONLY_SEMCONV.get(column) or f"llmtap.{column}"


def span_only(r: CallRecord) -> Iterator[tuple[str, Any]]:
    """The span-only attributes of ``r`` that are set, in the contract's order."""
    for name in SPAN_ONLY:
        v = getattr(r, name)
        if v is not None and v != "":
            yield attribute_name(name), v


def span_name(r: CallRecord) -> str:
    return f"{r.operation} {r.request_model}".strip()


def span_attributes(r: CallRecord) -> dict[str, Any]:
    """Typed span attributes (what an OTel SDK span carries)."""
    attrs: dict[str, Any] = {}
    for column, value in r.to_dict().items():
        if column in SPAN_FIELDS or value is None:
            continue
        if column in OMIT_EMPTY and not value:
            continue
        if isinstance(value, dict):  # a map column travels as one JSON string (OTel has no map values)
            value = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
        if column == "stream" and not value:
            continue  # GenAI semconv: set if and only if streaming
        attrs[attribute_name(column)] = value
    if r.finish_reason_raw:
        attrs["gen_ai.response.finish_reasons"] = [r.finish_reason_raw]
    if r.ttft_ms is not None:
        attrs["gen_ai.response.time_to_first_chunk"] = r.ttft_ms / 1000.0
    attrs.update(span_only(r))
    return attrs


def as_string(v: Any) -> str:
    """pcommon ``Value.AsString``: how the ClickHouse exporter stringifies attributes."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return es6_number(v)
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)):
        return json.dumps(list(v), separators=(",", ":"), ensure_ascii=False)
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def es6_number(f: float) -> str:
    """ES6 Number→String, as Go's pdata formats doubles (``float64AsString``)."""
    if math.isnan(f) or math.isinf(f):
        return "json: unsupported value: " + ("NaN" if math.isnan(f) else ("+Inf" if f > 0 else "-Inf"))
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    mant, _, e = repr(abs(f)).partition("e")  # repr gives the shortest round-trip digits
    ip, _, fp = mant.partition(".")
    raw = ip + fp
    digits = raw.lstrip("0")
    point = len(ip) + int(e or 0) - (len(raw) - len(digits))  # value = 0.<digits> * 10**point
    digits = digits.rstrip("0") or "0"
    if 1e-6 <= abs(f) < 1e21:
        if point <= 0:
            out = "0." + "0" * -point + digits
        elif point >= len(digits):
            out = digits + "0" * (point - len(digits))
        else:
            out = digits[:point] + "." + digits[point:]
    else:
        exp = point - 1
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        out = f"{m}e{'+' if exp >= 0 else '-'}{abs(exp)}"
    return sign + out


def _ch_time(unix_ns: int) -> str:
    return f"{unix_ns // 1_000_000_000}.{unix_ns % 1_000_000_000:09d}"


def otel_traces_row(r: CallRecord, resource: dict[str, str] | None = None) -> dict[str, Any]:
    """An ``otel_traces`` row, as the Collector's ClickHouse exporter would write it."""
    start_ns = round(r.timestamp * 1e9)
    dur_ns = round(r.duration_ms * 1e6)
    res = {"service.name": r.service or "unknown_service", **(resource or {})}
    return {
        "Timestamp": _ch_time(start_ns),
        "TraceId": r.trace_id,
        "SpanId": r.span_id,
        "ParentSpanId": r.parent_span_id,
        "TraceState": "",
        "SpanName": span_name(r),
        "SpanKind": "Client",
        "ServiceName": r.service or "unknown_service",
        "ResourceAttributes": res,
        "ScopeName": SCOPE_NAME,
        "ScopeVersion": __version__,
        "SpanAttributes": {k: as_string(v) for k, v in span_attributes(r).items()},
        "Duration": dur_ns,
        "StatusCode": "Error" if r.outcome == "error" else "Unset",
        "StatusMessage": r.error_message if r.outcome == "error" else "",
        "Events.Timestamp": [],
        "Events.Name": [],
        "Events.Attributes": [],
        "Links.TraceId": [],
        "Links.SpanId": [],
        "Links.TraceState": [],
        "Links.Attributes": [],
    }
