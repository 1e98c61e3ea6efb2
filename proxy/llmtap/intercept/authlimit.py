"""Proxy authentication that cannot be guessed quickly: failed attempts are budgeted per client address.

mitmproxy's ``proxyauth`` addon checks ``Proxy-Authorization`` on every CONNECT and plain request;
unbounded, that is ~500 guesses a second. Two small addons around it (:func:`addons`) give each
client address a budget of failed attempts (:data:`BURST`, refilled at one per :data:`REFILL_S`):
while it is spent, the credentials of that address's requests are removed before ``proxyauth`` sees
them, so they are not even checked (the answer is the usual 407), and a guess that would have been
right teaches nothing. Which addresses failed is kept for at most :data:`MAX_CLIENTS` of them.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any

log = logging.getLogger("llmtap.proxyauth")

BURST = 10
REFILL_S = 1.0
MAX_CLIENTS = 10_000
_HEADER = "Proxy-Authorization"
_MARK = "llmtap_auth_tried"


class _Budget:
    def __init__(self) -> None:
        self.buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # ip → (tokens, at)

    def tokens(self, ip: str) -> float:
        tokens, at = self.buckets.get(ip, (float(BURST), time.monotonic()))
        return min(float(BURST), tokens + (time.monotonic() - at) / REFILL_S)

    def spend(self, ip: str) -> None:
        self.buckets[ip] = (max(self.tokens(ip) - 1, 0.0), time.monotonic())
        self.buckets.move_to_end(ip)
        while len(self.buckets) > MAX_CLIENTS:
            self.buckets.popitem(last=False)


def _ip(flow: Any) -> str:
    peer = getattr(flow.client_conn, "peername", None)
    return str(peer[0]) if peer else ""


class Before:
    """Runs before ``proxyauth``: strips the credentials of an address whose budget is spent."""

    def __init__(self, budget: _Budget) -> None:
        self.budget = budget
        self.refused = 0
        self._last_log = 0.0

    def _check(self, flow: Any) -> None:
        if flow.response is not None or _HEADER not in flow.request.headers:
            return
        ip = _ip(flow)
        if self.budget.tokens(ip) < 1:
            del flow.request.headers[_HEADER]  # not checked at all: proxyauth answers 407
            self.refused += 1
            now = time.monotonic()
            if now - self._last_log > 10:
                self._last_log = now
                log.warning("proxy authentication: too many failures from %s; attempts refused unchecked", ip)
            return
        flow.metadata[_MARK] = True

    def http_connect(self, flow: Any) -> None:
        self._check(flow)

    def requestheaders(self, flow: Any) -> None:
        self._check(flow)


class After:
    """Runs after ``proxyauth``: a checked attempt that got 407 spends one of its address's budget."""

    def __init__(self, budget: _Budget) -> None:
        self.budget = budget

    def _count(self, flow: Any) -> None:
        if flow.metadata.pop(_MARK, False) and flow.response is not None and flow.response.status_code == 407:
            self.budget.spend(_ip(flow))

    def http_connect(self, flow: Any) -> None:
        self._count(flow)

    def requestheaders(self, flow: Any) -> None:
        self._count(flow)


def addons() -> tuple[Before, After]:
    budget = _Budget()
    return Before(budget), After(budget)
