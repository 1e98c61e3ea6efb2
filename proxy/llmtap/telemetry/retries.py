"""Retry detection on live traffic: the ``attempt`` column (DESIGN.md, "Contract additions").

``attempt`` is 1 for a first request and n for the n-th request with the same ``request_hash`` and
the same ``api_key_id`` sent within 10 minutes of a *failed* earlier one. Identical requests that
succeed are not retries (a cache, a poll, a benchmark): a request only counts as a retry of one
that ended in ``outcome = 'error'``. The chain goes on while each attempt fails, so a request that
failed twice and then worked is attempts 1, 2, 3.

An enricher (:class:`~llmtap.pipeline.Enricher`) on the worker thread: records arrive in the order
calls end, and a retry starts after the attempt it repeats ended. The state is bounded (the oldest
request keys are forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..record import CallRecord

WINDOW_S = 600.0
MAX_KEYS = 50_000


@dataclass
class _Last:
    attempt: int
    ended: float  # epoch seconds the attempt ended
    error_type: str  # "" when it did not fail


class RetryDetector:
    def __init__(self, window_s: float = WINDOW_S, max_keys: int = MAX_KEYS) -> None:
        self.window_s = window_s
        self.max_keys = max_keys
        self._last: OrderedDict[tuple[str, str], _Last] = OrderedDict()

    def enrich(self, r: CallRecord, ctx: object = None) -> None:
        if not r.request_hash:
            return
        key = (r.request_hash, r.api_key_id)
        prev = self._last.pop(key, None)
        if prev is not None and prev.error_type and r.timestamp - prev.ended <= self.window_s:
            r.attempt = prev.attempt + 1
            r.extra["retried_error_type"] = prev.error_type
        else:
            r.attempt = 1
        failed = (r.error_type or "error") if r.outcome == "error" else ""
        self._last[key] = _Last(r.attempt, r.timestamp + r.duration_ms / 1000.0, failed)
        while len(self._last) > self.max_keys:
            self._last.popitem(last=False)
