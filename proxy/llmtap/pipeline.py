"""Finishing calls off the event loop: capture → record → sinks (metrics, store, ...).

The proxy hooks only enqueue; one worker thread builds records (JSON bodies,
estimation, percentiles) and hands them to each sink. A failing sink is counted
and logged, never propagated.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from .capture import Capture, End
from .content import content_attributes
from .estimate import TokenEstimator
from .metrics import Metrics
from .pricing import Pricer
from .record import CallRecord

log = logging.getLogger("llmtap.pipeline")

Sink = Callable[[CallRecord], None]


class Pipeline:
    def __init__(
        self,
        metrics: Metrics,
        estimator: TokenEstimator | None,
        sinks: list[Sink],
        max_queue: int = 100_000,
        pricer: Pricer | None = None,
        capture_content: bool = False,
    ) -> None:
        self.metrics = metrics
        self.estimator = estimator
        self.sinks = sinks
        self.pricer = pricer
        self.capture_content = capture_content
        self._q: queue.Queue[tuple[Capture, End] | None] = queue.Queue(max_queue)
        self._pending = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="llmtap-pipeline", daemon=True)
        self._thread.start()

    def submit(self, cap: Capture, end: End) -> None:
        """Called on the event loop: O(1), never blocks."""
        try:
            with self._lock:
                self._pending += 1
            self._q.put_nowait((cap, end))
        except queue.Full:
            with self._lock:
                self._pending -= 1
            self.metrics.dropped.labels("pipeline_queue_full").inc()

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            cap, end = item
            try:
                rec = cap.build(end, self.estimator)
            except Exception:
                log.exception("building the record for %s failed", cap.facts.api)
                self.metrics.dropped.labels("build_error").inc()
                self._done()
                continue
            try:
                if self.pricer is not None:
                    self.pricer.apply(rec)
                if self.capture_content:
                    obs = cap.adapter.obs
                    rec.extra.update(content_attributes(cap.request_json, "".join(obs.output_text), rec.finish_reason))
            except Exception:
                log.exception("enriching the record for %s failed", rec.api)
            if "parse_error" in rec.extra:
                log.warning("side parser stopped for a %s call: %s", rec.api, rec.extra["parse_error"])
            try:
                self.metrics.observe(rec, cap.adapter.obs.clock.gaps)
            except Exception:
                log.exception("metrics sink failed")
            for sink in self.sinks:
                try:
                    sink(rec)
                except Exception:
                    log.exception("sink %r failed", sink)
                    self.metrics.dropped.labels("sink_error").inc()
            self._done()

    def _done(self) -> None:
        with self._lock:
            self._pending -= 1

    def pending(self) -> int:
        with self._lock:
            return self._pending

    def drain(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while self.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.pending() == 0

    def close(self, timeout: float = 10.0) -> None:
        self.drain(timeout)
        self._q.put(None)
        self._thread.join(timeout)
