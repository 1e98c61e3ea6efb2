"""The viewer's own pages: one call (from its trace id) and one session, as JSON for ``static/``.

The queries live here once and take the ids as bound query parameters (``{trace_id:String}``), never as
SQL text; they run through the same guarded read path as every panel. Shaping (which attempts belong to
this call's request, the session's totals) is done on the rows, in Python, so the browser only draws.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..errors import LlmtapError

QueryFn = Callable[[str, str, dict[str, str]], bytes]  # (sql, format, params) → body
ID_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")
MAX_SESSION_ID = 256  # what capture keeps of a session header (intercept/attribution.py)
MAX_SESSION_CALLS = 2000

CALL_SQL = "SELECT * FROM llm_calls WHERE trace_id = {trace_id:String} ORDER BY timestamp LIMIT 1"
# The calls with this call's request body and key within an hour of it: its attempts, and repeats of it.
ATTEMPTS_SQL = """WITH (SELECT tuple(request_hash, api_key_id, timestamp) FROM llm_calls
    WHERE trace_id = {trace_id:String} LIMIT 1) AS me
SELECT timestamp, trace_id, attempt, outcome, error_type, status_code, retry_after_s, duration_ms, cost_usd
FROM llm_calls
WHERE me.1 != '' AND request_hash = me.1 AND api_key_id = me.2
    AND timestamp BETWEEN me.3 - INTERVAL 1 HOUR AND me.3 + INTERVAL 1 HOUR
ORDER BY timestamp LIMIT 100"""
CONTENT_SQL = """SELECT input_messages, output_messages FROM llm_content
WHERE trace_id = {trace_id:String} ORDER BY timestamp LIMIT 1"""
SESSION_SQL = f"""SELECT timestamp, trace_id, service, provider, request_model, feature, prompt_version, outcome,
    error_type, attempt, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cache_miss_reason,
    cache_miss_cost_usd, cost_usd, ttft_ms, duration_ms, tool_calls, finish_reason,
    sum(ifNull(cost_usd, 0)) OVER (ORDER BY timestamp, trace_id ROWS UNBOUNDED PRECEDING) AS cost_total_usd,
    sum(duration_ms) OVER (ORDER BY timestamp, trace_id ROWS UNBOUNDED PRECEDING) AS llm_time_total_ms,
    toUnixTimestamp64Milli(timestamp) - min(toUnixTimestamp64Milli(timestamp)) OVER () + duration_ms AS elapsed_ms
FROM llm_calls WHERE session_id = {{session_id:String}} AND session_id != ''
ORDER BY timestamp, trace_id LIMIT {MAX_SESSION_CALLS}"""


class PageError(LlmtapError, ValueError):
    pass


def _id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not ID_RE.match(value):
        raise PageError(f"{what} must be 1-200 letters, digits or _.:-")
    return value


def _session_id(value: Any) -> str:
    """Any text an app sent as its session (a bound parameter, so quotes and markup are just characters)."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_SESSION_ID or not value.isprintable():
        raise PageError(f"session_id must be 1-{MAX_SESSION_ID} printable characters")
    return value


def _rows(query: QueryFn, sql: str, params: dict[str, str]) -> list[dict[str, Any]]:
    body = query(sql, "JSONEachRow", params)
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def _chain(rows: list[dict[str, Any]], trace_id: str) -> list[dict[str, Any]]:
    """The attempts of this call's request: back to its first attempt, on to its last retry."""
    i = next((k for k, r in enumerate(rows) if r["trace_id"] == trace_id), None)
    if i is None:
        return []
    start = i
    while start > 0 and int(rows[start]["attempt"]) > 1:
        start -= 1
    end = i + 1
    while end < len(rows) and int(rows[end]["attempt"]) > 1:
        end += 1
    chain = rows[start:end]
    return chain if len(chain) > 1 else []


def call_page(query: QueryFn, req: dict[str, Any], grafana_url: str = "") -> dict[str, Any]:
    trace_id = _id(req.get("trace_id"), "trace_id")
    p = {"trace_id": trace_id}
    found = _rows(query, CALL_SQL, p)
    if not found:
        raise PageError(f"no call with trace id {trace_id}")
    call = found[0]
    session: list[dict[str, Any]] = []
    if call.get("session_id"):
        session = _rows(query, SESSION_SQL, {"session_id": str(call["session_id"])})
    content = _rows(query, CONTENT_SQL, p)
    out: dict[str, Any] = {
        "call": call,
        "attempts": _chain(_rows(query, ATTEMPTS_SQL, p), trace_id),
        "session": _around(session, trace_id),
        "session_calls": len(session),
        "content": content[0] if content else None,
        "links": {"trace": f"#llmtap-trace?trace_id={trace_id}"},
    }
    if grafana_url:
        out["links"]["grafana"] = f"{grafana_url.rstrip('/')}/d/llmtap-trace/llm-trace?var-trace_id={trace_id}"
    return out


def _around(rows: list[dict[str, Any]], trace_id: str, n: int = 10) -> list[dict[str, Any]]:
    """This call's neighbours in its session (the session page has them all)."""
    i = next((k for k, r in enumerate(rows) if r["trace_id"] == trace_id), 0)
    return rows[max(i - n, 0) : i + n + 1]


def session_page(query: QueryFn, req: dict[str, Any]) -> dict[str, Any]:
    session_id = _session_id(req.get("session_id"))
    rows = _rows(query, SESSION_SQL, {"session_id": session_id})
    if not rows:
        raise PageError(f"no calls in session {session_id}")
    for r in rows:
        cached = int(r["cache_read_tokens"] or 0)
        r["cache"] = "hit" if cached else (f"miss: {r['cache_miss_reason']}" if r["cache_miss_reason"] else "")
    last = rows[-1]
    return {
        "session_id": session_id,
        "calls": rows,
        "truncated": len(rows) >= MAX_SESSION_CALLS,
        "summary": {
            "calls": len(rows),
            "cost_usd": last["cost_total_usd"],
            "elapsed_ms": max(float(r["elapsed_ms"]) for r in rows),
            "llm_time_ms": last["llm_time_total_ms"],
            "input_tokens": sum(int(r["input_tokens"]) for r in rows),
            "output_tokens": sum(int(r["output_tokens"]) for r in rows),
            "cache_hits": sum(1 for r in rows if int(r["cache_read_tokens"] or 0) > 0),
            "cache_misses": sum(1 for r in rows if r["cache_miss_reason"]),
            "cache_miss_cost_usd": sum(float(r["cache_miss_cost_usd"] or 0) for r in rows),
            "retries": sum(1 for r in rows if int(r["attempt"]) > 1),
            "errors": sum(1 for r in rows if r["outcome"] == "error"),
            "models": sorted({str(r["request_model"]) for r in rows}),
            "first": rows[0]["timestamp"],
            "last": last["timestamp"],
        },
    }
