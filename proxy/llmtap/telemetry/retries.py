"""Retry detection: ``attempt`` (the contract), an :class:`~llmtap.pipeline.Enricher` on the worker.

``attempt`` is 1 for a first request, and n for the n-th request with the same ``request_hash``
(the same body) and the same ``api_key_id`` sent within :data:`RETRY_WINDOW_S` (10 minutes) of a
failed earlier one: an SDK's or an application's retry. A success ends the chain (the same
request sent again later is a new request); so does a gap longer than the window.

A request counts as a retry only if it started after the failed attempt had started and no more
than a second before it ended (a retry is sent once the failure is seen; two identical requests
in flight together are not each other's retries). The retry carries the error type of the attempt
it repeats in ``extra["retried_error_type"]`` (span attribute ``llmtap.retried_error_type``,
``llmtap_retry_attempts_total{error_type}``); a cancelled attempt (the client gave up, e.g. its
timeout) repeats as ``cancelled``.

Bounded: only chains whose last attempt failed are kept, at most :data:`MAX_CHAINS` (least
recently failed dropped first), and each is dropped once its window has passed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..record import CallRecord

RETRY_WINDOW_S = 600.0
MAX_CHAINS = 10_000
_OVERLAP_S = 1.0  # clock slack: a retry may be seen to start a moment before its failure is recorded as ended


@dataclass(slots=True)
class _Chain:
    attempts: int  # the attempt number of the last (failed) attempt
    started: float
    ended: float
    error_type: str


class RetryDetector:
    def __init__(self, window_s: float = RETRY_WINDOW_S, max_chains: int = MAX_CHAINS) -> None:
        self.window_s = window_s
        self.max_chains = max_chains
        self._chains: OrderedDict[tuple[str, str], _Chain] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._chains)

    def enrich(self, r: CallRecord, ctx: object = None) -> None:
        if not r.request_hash or r.billing == "batch":
            return
        key = (r.request_hash, r.api_key_id)
        t = r.timestamp
        with self._lock:
            chain = self._chains.get(key)
            retry = chain is not None and chain.started < t and chain.ended - _OVERLAP_S <= t
            if chain is not None and retry and t <= chain.ended + self.window_s:
                r.attempt = min(chain.attempts + 1, 65535)
                r.retried_error_type = chain.error_type
            if r.outcome != "ok":  # failed (an error, or the client gave up): its retry may follow
                self._chains.pop(key, None)
                self._chains[key] = _Chain(r.attempt, t, t + r.duration_ms / 1000.0, r.error_type or str(r.outcome))
                self._expire(t)
            elif retry:  # a success ends the chain (and so does a window that passed)
                del self._chains[key]

    def _expire(self, now: float) -> None:
        while len(self._chains) > self.max_chains:
            self._chains.popitem(last=False)
        while self._chains:
            oldest = next(iter(self._chains.values()))
            if oldest.ended + self.window_s >= now:
                break
            self._chains.popitem(last=False)
