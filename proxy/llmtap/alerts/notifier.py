"""``--alert-webhook``: the alert thread. Every ``--alert-interval`` it evaluates the rules; between
evaluations it delivers the queued events to the webhook, in order, each once. A delivery that fails
(refused, timed out, a non-2xx answer) is logged and retried with backoff (1 s doubling to 5 min); it
never touches the traffic: the thread only reads the store and talks to the webhook.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import LlmtapError
from .evaluator import STATE_FILE, Evaluator, QueryFn

log = logging.getLogger("llmtap.alerts")
MAX_BACKOFF_S = 300.0
TIMEOUT_S = 5.0
MAX_OUTBOX = 1000


class WebhookError(LlmtapError, ValueError):
    pass


def check_webhook_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise WebhookError(f"--alert-webhook needs an http(s):// URL, got {url!r}")
    return url


def post(url: str, body: dict[str, object], timeout: float = TIMEOUT_S) -> None:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json", "User-Agent": "llmtap-alerts"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        if not 200 <= resp.status < 300:
            raise WebhookError(f"HTTP {resp.status}")
        resp.read()


class AlertThread:
    def __init__(
        self, query: QueryFn, data_dir: Path, url: str, interval_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self.url = check_webhook_url(url)
        self.clock = clock  # the wall clock of retry times (saved with the outbox); tests inject theirs
        self.interval_s = max(float(interval_s), 1.0)
        self.evaluator = Evaluator(query, data_dir / STATE_FILE)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llmtap-alerts", daemon=True)
        self.delivered = 0

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        next_eval = time.monotonic() + min(self.interval_s, 5.0)  # the first look soon after start
        while not self._stop.is_set():
            if time.monotonic() >= next_eval:
                next_eval = time.monotonic() + self.interval_s
                try:
                    for e in self.evaluator.evaluate():
                        log.info("alert %s: %s", e.status, e.payload()["text"])
                except Exception as e:
                    log.warning("alerts: evaluation failed: %s", e)
            self._deliver()
            wake = next_eval
            pending = [e.next_try for e in self.evaluator.state.outbox]
            if pending:
                wake = min(wake, time.monotonic() + max(min(pending) - self.clock(), 0.0))
            self._stop.wait(max(wake - time.monotonic(), 0.05))

    def _deliver(self) -> None:
        state = self.evaluator.state
        if len(state.outbox) > MAX_OUTBOX:
            dropped = len(state.outbox) - MAX_OUTBOX
            log.warning("alerts: webhook unreachable for long: dropping the %d oldest notifications", dropped)
            del state.outbox[:dropped]
        changed = False
        while state.outbox and not self._stop.is_set():
            e = state.outbox[0]
            if e.next_try > self.clock():
                break
            try:
                post(self.url, e.payload())
            except (OSError, urllib.error.URLError, WebhookError, ValueError) as err:
                e.attempts += 1
                delay = min(2.0 ** (e.attempts - 1), MAX_BACKOFF_S)
                e.next_try = self.clock() + delay
                log.warning("alerts: webhook POST failed (%s), attempt %d; retrying in %.0f s", err, e.attempts, delay)
                changed = True
                break
            state.outbox.pop(0)
            self.delivered += 1
            changed = True
        if changed:
            state.save()
