"""A record → its ``otel_traces`` row in RowBinary, in one pass: what the store sink writes per call.

The same bytes as :func:`llmtap.store.rowbinary.encode` of :func:`llmtap.telemetry.semconv.otel_traces_row`
(``tests/unit/store/test_rows.py`` checks it on random records), without the two dictionaries in between:
the attribute names are encoded once per column, numbers stringified as the Collector's exporter does
(:func:`~llmtap.telemetry.semconv.as_string`), and the row assembled as bytes. That path cost more than
everything else the recorder did for a call.
"""

from __future__ import annotations

import json
import struct
from dataclasses import fields

from .. import SCOPE_NAME, __version__
from ..record import NOT_COLUMNS, CallRecord
from ..telemetry.semconv import OMIT_EMPTY, SPAN_FIELDS, as_string, attribute_name, es6_number, span_name
from .rowbinary import _string, _uvarint

_Q = struct.Struct("<q")
_UQ = struct.Struct("<Q")
# (column, its attribute name encoded, omitted when empty, omitted when false): the span_attributes order.
_PLAN: tuple[tuple[str, bytes, bool, bool], ...] = tuple(
    (f.name, _string(attribute_name(f.name)), f.name in OMIT_EMPTY, f.name == "stream")
    for f in fields(CallRecord)
    if f.name not in NOT_COLUMNS and f.name not in SPAN_FIELDS
)
_FINISH_REASONS = _string("gen_ai.response.finish_reasons")
_TTFC = _string("gen_ai.response.time_to_first_chunk")
_SCOPE = _string(SCOPE_NAME) + _string(__version__)
_KIND = _string("Client")
_EMPTY = _string("")
_ERROR, _UNSET = _string("Error"), _string("Unset")
_SERVICE_NAME = _string("service.name")


def number(v: float) -> str:
    """:func:`~llmtap.telemetry.semconv.es6_number`, with the common case (``repr`` already in ES6 form) fast."""
    if v != v or v in (float("inf"), float("-inf")):
        return es6_number(v)
    a = -v if v < 0 else v
    if 1e-4 <= a < 1e16:  # repr writes these without an exponent, with the same shortest digits as ES6
        s = repr(v)
        return s[:-2] if s.endswith(".0") else s
    return es6_number(v)


def _value(v: object) -> str:
    if v.__class__ is str:
        return v  # type: ignore[return-value]
    if v.__class__ is float:
        return number(v)  # type: ignore[arg-type]
    if v.__class__ is bool:
        return "true" if v else "false"
    if v.__class__ is int:
        return str(v)
    if isinstance(v, dict):  # a map column travels as one JSON string (OTel has no map values)
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return as_string(v)


def encode_record(r: CallRecord, resource: dict[str, str] | None = None) -> bytes:
    out: list[bytes] = []
    n = 0
    for name, key, omit_empty, flag in _PLAN:
        v = getattr(r, name)
        if v is None or ((omit_empty or flag) and not v):
            continue
        out.append(key)
        out.append(_string(_value(v)))
        n += 1
    if r.finish_reason_raw:
        out.append(_FINISH_REASONS)
        out.append(_string(json.dumps([r.finish_reason_raw], separators=(",", ":"), ensure_ascii=False)))
        n += 1
    if r.ttft_ms is not None:
        out.append(_TTFC)
        out.append(_string(number(r.ttft_ms / 1000.0)))
        n += 1
    for k, v in r.extra.items():
        if v is not None and v != "" and k != "parent_span_id":
            out.append(_string(k if k.startswith("gen_ai.") else f"llmtap.{k}"))
            out.append(_string(as_string(v)))
            n += 1
    service = r.service or "unknown_service"
    res = {"service.name": service, **(resource or {})}
    head = [
        _Q.pack(round(r.timestamp * 1e9)),
        _string(r.trace_id),
        _string(r.span_id),
        _string(r.extra.get("parent_span_id", "")),
        _EMPTY,  # TraceState
        _string(span_name(r)),
        _KIND,
        _string(service),
        _uvarint(len(res)),
    ]
    for k, v in res.items():
        head.append(_SERVICE_NAME if k == "service.name" else _string(k))
        head.append(_string(v))
    head.append(_SCOPE)
    head.append(_uvarint(n))
    error = r.outcome == "error"
    status = (_ERROR, _string(r.error_message)) if error else (_UNSET, _EMPTY)
    tail = (_UQ.pack(round(r.duration_ms * 1e6)), *status)
    return b"".join(head) + b"".join(out) + b"".join(tail)
