"""The viewer's own endpoints beside the dashboards': the store's status, the explain analyses, a call, a
session. Requests carry choices and ids, never SQL; the SQL is :mod:`.explain_sql`, :mod:`.latency_sql` and
:mod:`.pages`, the same the CLI and Grafana run.

A store that does not answer is reported once and quickly (``/api/status`` answers within
``PROBE_TIMEOUT_S``), and every failure that comes from an unreachable store is a 503 with
``store_unreachable``, so the page shows one banner instead of an exception in every panel.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import LlmtapError
from .explain import ExplainError, Periods, cost_text, explain_cost, parse_end
from .explain_latency import explain_latency, latency_text
from .pages import PageError, call_page, session_page

QueryFn = Callable[[str, str, dict[str, str]], bytes]
PROBE_TIMEOUT_S = 2.0
PROBE_TTL_S = 3.0
BY_CHOICES = ("model", "feature", "provider", "service", "user", "key", "tenant")
_UNREACHABLE = (
    "connection refused",
    "failed to establish",
    "max retries exceeded",
    "timed out",
    "name or service not known",
    "temporary failure in name resolution",
    "connection reset",
    "connection aborted",
    "no route to host",
    "network is unreachable",
    "remote end closed",
)


class Unreachable(LlmtapError, RuntimeError):
    """The store does not answer (as opposed to a query it refused)."""


def unreachable(e: BaseException) -> bool:
    if isinstance(e, (Unreachable, ConnectionError, TimeoutError)):
        return True
    if type(e).__name__ == "OperationalError":  # clickhouse-connect: the server could not be reached
        return True
    text = str(e).lower()
    return any(m in text for m in _UNREACHABLE)


def short(e: BaseException) -> str:
    """One line of an error, without the driver's retry chatter."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text[:300]


class StoreProbe:
    """``SELECT 1`` on the read path, answered within ``PROBE_TIMEOUT_S`` (a hung store is "not answering"),
    at most one probe in flight, the answer kept for ``PROBE_TTL_S``."""

    def __init__(self, query: QueryFn) -> None:
        self.query = query
        self._lock = threading.Lock()
        self._result: dict[str, Any] = {"ok": None}
        self._at = 0.0
        self._inflight: threading.Thread | None = None

    def status(self) -> dict[str, Any]:
        with self._lock:
            if time.monotonic() - self._at < PROBE_TTL_S:
                return dict(self._result)
            if self._inflight is None or not self._inflight.is_alive():
                self._inflight = threading.Thread(target=self._probe, name="llmtap-store-probe", daemon=True)
                self._inflight.start()
            probe = self._inflight
        probe.join(PROBE_TIMEOUT_S)
        with self._lock:
            if probe.is_alive():
                self._result = {"ok": False, "error": f"the store has not answered for {PROBE_TIMEOUT_S:g} s"}
                self._at = time.monotonic()
            return dict(self._result)

    def _probe(self) -> None:
        try:
            self.query("SELECT 1", "TSV", {})
            result: dict[str, Any] = {"ok": True}
        except Exception as e:
            result = {"ok": False, "error": short(e)} if unreachable(e) else {"ok": True, "warning": short(e)}
        with self._lock:
            self._result, self._at = result, time.monotonic()


def _periods(req: dict[str, Any]) -> Periods:
    window, baseline, end = req.get("window", "24h"), req.get("baseline", "7d"), req.get("end")
    if not isinstance(window, str) or not isinstance(baseline, str):
        raise ExplainError("window and baseline are strings like 24h and 7d")
    if end is not None and (isinstance(end, bool) or not isinstance(end, (int, float, str))):
        raise ExplainError("end takes unix seconds or an ISO time")
    return Periods.parse(window, baseline, parse_end(str(end)) if end not in (None, "") else None)


def _rows(query: QueryFn) -> Callable[[str], list[dict[str, Any]]]:
    def rows(sql: str) -> list[dict[str, Any]]:
        body = query(sql, "JSONEachRow", {})
        return [json.loads(line) for line in body.splitlines() if line.strip()]

    return rows


def explain_cost_api(query: QueryFn, req: dict[str, Any]) -> dict[str, Any]:
    by = req.get("by") or ["model", "feature"]
    if not isinstance(by, list) or not by or not all(isinstance(b, str) and b in BY_CHOICES for b in by):
        raise ExplainError(f"by takes a list of {', '.join(BY_CHOICES)}")
    res = explain_cost(_rows(query), _periods(req), by)
    return {**res, "text": cost_text(res)}


def explain_latency_api(query: QueryFn, req: dict[str, Any]) -> dict[str, Any]:
    metric = req.get("metric", "duration")
    q = {"p50": 0.5, "p90": 0.9, "p95": 0.95}.get(str(req.get("quantile", "p95")))
    if metric not in ("duration", "ttft") or q is None:
        raise ExplainError("metric takes duration or ttft, quantile p50, p90 or p95")
    res = explain_latency(_rows(query), _periods(req), metric, q)
    return {**res, "text": latency_text(res)}


ROUTES: dict[str, Callable[..., dict[str, Any]]] = {
    "/api/explain-cost": explain_cost_api,
    "/api/explain-latency": explain_latency_api,
    "/api/call": call_page,
    "/api/session": session_page,
}
BAD_REQUEST = (ExplainError, PageError)


def handle(path: str, query: QueryFn, req: Any, grafana_url: str = "") -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of one viewer API request."""
    if not isinstance(req, dict):
        return 400, {"error": "expected a JSON object"}
    try:
        if path == "/api/call":
            return 200, call_page(query, req, grafana_url)
        return 200, ROUTES[path](query, req)
    except BAD_REQUEST as e:
        return (404 if str(e).startswith("no call") else 400), {"error": str(e)}
    except Exception as e:
        if unreachable(e):
            return 503, {"error": f"store unreachable: {short(e)}", "store_unreachable": True}
        return 500, {"error": f"query failed: {short(e)}"}
