"""A record → its ``otel_traces`` row in RowBinary, in one pass: what the store sink writes per call.

The same bytes as :func:`llmtap.store.rowbinary.encode` of :func:`llmtap.telemetry.semconv.otel_traces_row`
(``tests/unit/store/test_rows.py`` checks it on random records), without the two dictionaries in between:
each column's attribute name is encoded once and its value stringified by an encoder chosen from its type
(as the Collector's exporter stringifies it: :func:`~llmtap.telemetry.semconv.as_string`), and the row is
assembled as bytes. That path cost more than everything else the recorder did for a call.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import fields
from typing import Any, Literal, get_args, get_origin, get_type_hints

from .. import SCOPE_NAME, __version__
from ..record import NOT_COLUMNS, SPAN_ONLY, CallRecord
from ..telemetry.semconv import OMIT_EMPTY, SPAN_FIELDS, as_string, attribute_name, es6_number, span_name
from .rowbinary import _string, _uvarint

_Q = struct.Struct("<q")
_UQ = struct.Struct("<Q")
_INF, _NINF = float("inf"), float("-inf")


def number(v: float) -> str:
    """:func:`~llmtap.telemetry.semconv.es6_number`, with the common cases fast: ``repr`` has the same shortest
    digits, written without an exponent from 1e-4 to 1e16 (ES6's own form there) and with one down to ES6's 1e-6."""
    if v != v or v in (_INF, _NINF):
        return es6_number(v)
    a = -v if v < 0 else v
    if 1e-4 <= a < 1e16:
        s = repr(v)
        return s[:-2] if s.endswith(".0") else s
    if 1e-6 <= a < 1e-4:  # "7.75e-05" → "0.0000775"
        mant, _, exp = repr(a).partition("e")
        return ("-" if v < 0 else "") + "0." + "0" * (-int(exp) - 1) + mant.replace(".", "")
    return es6_number(v)


# Per column type; a value of another type than its column's (it should not happen) takes the general path.
def _text(v: str) -> bytes:
    return _string(v if v.__class__ is str else as_string(v))


def _int(v: int) -> bytes:
    return _string(str(v) if v.__class__ is int else as_string(v))


def _float(v: float) -> bytes:
    return _string(number(v) if v.__class__ is float else as_string(v))


def _bool(v: bool) -> bytes:
    if v.__class__ is not bool:
        return _string(as_string(v))
    return _TRUE if v else _FALSE


def _json(v: dict[str, str]) -> bytes:  # a map column travels as one JSON string (OTel has no map values)
    if not isinstance(v, dict):
        return _string(as_string(v))
    return _string(json.dumps(v, separators=(",", ":"), ensure_ascii=False, sort_keys=True))


_TRUE, _FALSE = _string("true"), _string("false")
_BY_TYPE: dict[type, Callable[[Any], bytes]] = {str: _text, int: _int, float: _float, bool: _bool, dict: _json}


class _Vocabulary:
    """A column's encoder that keeps the bytes of its values while it has few (providers, models, services,
    status codes...: the same handful call after call); past :data:`VOCABULARY` values (ids, counts) it
    stops keeping them."""

    __slots__ = ("cache", "encode", "kind")

    def __init__(self, encode: Callable[[Any], bytes], kind: type) -> None:
        self.encode, self.kind = encode, kind
        self.cache: dict[Any, bytes] | None = {}

    def __call__(self, v: Any) -> bytes:
        cache = self.cache
        if cache is None or v.__class__ is not self.kind:
            return self.encode(v)
        b = cache.get(v)
        if b is None:
            b = self.encode(v)
            if len(cache) < VOCABULARY:
                cache[v] = b
            else:
                self.cache = None
        return b


VOCABULARY = 64


def _encoder(hint: Any) -> Callable[[Any], bytes]:
    """The column's stringification, from its type (``Optional`` and ``Literal`` unwrapped)."""
    if get_origin(hint) is Literal:
        return _Vocabulary(_text, str)
    args = [a for a in get_args(hint) if a is not type(None)]
    if args and get_origin(hint) is not dict:
        return _encoder(args[0])
    kind = get_origin(hint) or hint
    return _Vocabulary(_BY_TYPE[kind], kind) if kind in (str, int) else _BY_TYPE[kind]


_HINTS = get_type_hints(CallRecord)
# (column, its attribute name encoded, its value's encoder, omitted when empty/false): the span_attributes order.
_PLAN: tuple[tuple[str, bytes, Callable[[Any], bytes], bool], ...] = tuple(
    (f.name, _string(attribute_name(f.name)), _encoder(_HINTS[f.name]), f.name in OMIT_EMPTY or f.name == "stream")
    for f in fields(CallRecord)
    if f.name not in NOT_COLUMNS and f.name not in SPAN_FIELDS
)
_SPAN_ONLY: tuple[tuple[str, bytes, Callable[[Any], bytes]], ...] = tuple(
    (name, _string(attribute_name(name)), _encoder(_HINTS[name])) for name in SPAN_ONLY
)
_FINISH_REASONS = _string("gen_ai.response.finish_reasons")
_TTFC = _string("gen_ai.response.time_to_first_chunk")
_SCOPE = _string(SCOPE_NAME) + _string(__version__)
_KIND = _string("Client")
_EMPTY = _string("")
_ERROR, _UNSET = _string("Error"), _string("Unset")
_SERVICE_NAME = _string("service.name")


def encode_record(r: CallRecord, resource: dict[str, str] | None = None) -> bytes:
    out: list[bytes] = []
    n = 0
    for name, key, encode, omit_empty in _PLAN:
        v = getattr(r, name)
        if v is None or (omit_empty and not v):
            continue
        out.append(key)
        out.append(encode(v))
        n += 1
    if r.finish_reason_raw:
        out.append(_FINISH_REASONS)
        out.append(_string(json.dumps([r.finish_reason_raw], separators=(",", ":"), ensure_ascii=False)))
        n += 1
    if r.ttft_ms is not None:
        out.append(_TTFC)
        out.append(_string(number(r.ttft_ms / 1000.0)))
        n += 1
    for name, key, encode in _SPAN_ONLY:
        v = getattr(r, name)
        if v is not None and v != "":
            out.append(key)
            out.append(encode(v))
            n += 1
    service = r.service or "unknown_service"
    res = {"service.name": service, **(resource or {})}
    head = [
        _Q.pack(round(r.timestamp * 1e9)),
        _string(r.trace_id),
        _string(r.span_id),
        _string(r.parent_span_id),
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
