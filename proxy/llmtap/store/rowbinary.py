"""``otel_traces`` rows in ClickHouse's RowBinary format: what the spool keeps and the writer inserts.

ClickHouse parses RowBinary several times faster than JSONEachRow (no text to scan, no
number or escape parsing): a row is its columns back to back, strings and maps prefixed by
their LEB128 length, integers little-endian. The column names and types come from the one
schema (``collector/schema.sql``); the Nested ``Events`` / ``Links`` columns, always empty
for llmtap's spans, are left to their defaults.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Callable, Mapping
from typing import Any

from .schema import schema_sql

TABLE = "otel_traces"
# The otel_traces columns llmtap writes, in insert order.
COLUMN_NAMES: tuple[str, ...] = (
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "TraceState",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "ScopeName",
    "ScopeVersion",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
)
_LEN = [bytes((i,)) for i in range(128)]
_KEYS: dict[str, bytes] = {}  # attribute names repeat in every row: encoded once
_MAX_KEYS = 4096


def _uvarint(n: int) -> bytes:
    if n < 128:
        return _LEN[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(v: str) -> bytes:
    b = v.encode("utf-8", "surrogatepass")
    n = len(b)
    return (_LEN[n] if n < 128 else _uvarint(n)) + b


def _key(k: str) -> bytes:
    b = _KEYS.get(k)
    if b is None:
        b = _string(k)
        if len(_KEYS) < _MAX_KEYS:
            _KEYS[k] = b
    return b


def _map(d: Mapping[str, str], out: list[bytes]) -> None:
    out.append(_uvarint(len(d)))
    for k, v in d.items():
        out.append(_key(k))
        out.append(_string(v if isinstance(v, str) else str(v)))


def _datetime64_9(v: str) -> bytes:
    """``"<seconds>.<nanoseconds>"`` (how :func:`llmtap.otel.otel_traces_row` writes it) → Int64 ticks."""
    sec, _, frac = v.partition(".")
    return struct.pack("<q", int(sec) * 1_000_000_000 + (int(frac[:9].ljust(9, "0")) if frac else 0))


_S = _string


def encode(row: Mapping[str, Any]) -> bytes:
    """One ``otel_traces`` row (as :func:`llmtap.otel.otel_traces_row` builds it) in RowBinary."""
    out = [
        _datetime64_9(row["Timestamp"]),
        _S(row["TraceId"]),
        _S(row["SpanId"]),
        _S(row.get("ParentSpanId", "")),
        _S(row.get("TraceState", "")),
        _S(row["SpanName"]),
        _S(row["SpanKind"]),
        _S(row["ServiceName"]),
    ]
    _map(row.get("ResourceAttributes") or {}, out)
    out.append(_S(row["ScopeName"]))
    out.append(_S(row.get("ScopeVersion", "")))
    _map(row.get("SpanAttributes") or {}, out)
    out.append(struct.pack("<Q", int(row["Duration"])))
    out.append(_S(row.get("StatusCode", "Unset")))
    out.append(_S(row.get("StatusMessage", "")))
    return b"".join(out)


@functools.cache
def structure() -> str:
    """``name Type, ...`` of :data:`COLUMN_NAMES` from the schema, as ``file(..., RowBinary, ...)`` reads them."""
    m = re.search(r"CREATE TABLE IF NOT EXISTS \{db\}\.otel_traces \((.*?)\n\) ENGINE", schema_sql(), re.S)
    if m is None:
        raise RuntimeError("collector/schema.sql has no otel_traces table")
    types: dict[str, str] = {}
    for line in m.group(1).splitlines():
        cm = re.match(r"\s*(\w+) (.+?)(?: CODEC\(.*\))?,?$", line)
        if cm:
            types[cm.group(1)] = cm.group(2)
    missing = [c for c in COLUMN_NAMES if c not in types]
    if missing:
        raise RuntimeError(f"otel_traces in collector/schema.sql lacks {missing}")
    # The bytes are read as plain String; the engine casts into the table's LowCardinality columns
    # once per block (reading them as LowCardinality builds a dictionary per row: ~3x slower).
    return ", ".join(f"{c} {re.sub(r'LowCardinality\((\w+)\)', r'\1', types[c])}" for c in COLUMN_NAMES)


# What each insert of llmtap's rows also sets, where the engine knows the setting (recent ClickHouse releases;
# the server store asks its server): the skip indexes of otel_traces (the Collector's bloom filters and minmax)
# are built by the merges, which build them again for every part they write, not by each insert too.
# A sixth of the insert's CPU here; queries are unchanged (a part without an index is read whole).
INSERT_SETTINGS: dict[str, int] = {"materialize_skip_indexes_on_insert": 0}


def insert_sql(db: str, token: str, extra_settings: str = "", settings: Mapping[str, int] = INSERT_SETTINGS) -> str:
    """The INSERT head (no FORMAT, no data): column list, the deduplication settings and ``settings``."""
    if "'" in token or "\\" in token:
        raise ValueError(f"bad deduplication token {token!r}")
    clause = f"insert_deduplication_token = '{token}', deduplicate_blocks_in_dependent_materialized_views = 1"
    clause += "".join(f", {k} = {int(v)}" for k, v in settings.items())
    if extra_settings:
        clause += ", " + extra_settings
    return f"INSERT INTO {db}.{TABLE} ({', '.join(COLUMN_NAMES)}) SETTINGS {clause}"


Encoder = Callable[[Mapping[str, Any]], bytes]
