"""Finishing calls: capture → record → enrichers → sinks, in the recorder's process.

The recorder (:mod:`llmtap.capture.recorder`) calls :meth:`Pipeline.process` for every call a proxy
worker ended, on its own thread; :meth:`Pipeline.submit` does the same on a thread of the pipeline's
(for tools and tests that drive captures themselves). Each record is built (JSON bodies, estimation,
percentiles), expanded (a batch's results download carries one record per item), enriched (pricing,
content capture, retry and cache analysis: they may read the :class:`~llmtap.capture.CallContext`),
redacted, and handed to every sink. A failing enricher or sink is counted and logged, never
propagated. The time it all took is added to the call's ``overhead_ms`` (the sinks' as their mean).

The pipeline owns its sinks' lifecycle, as an OpenTelemetry ``TracerProvider`` owns its span
processors: :meth:`Pipeline.close` drains the queue, then flushes and closes every sink in
order.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable
from time import perf_counter_ns
from typing import Protocol

from .capture import CallContext, Capture, End, TokenEstimator, build
from .record import CallRecord
from .telemetry.metrics import Metrics
from .telemetry.redact import redact_record

log = logging.getLogger("llmtap.pipeline")


class RecordSink(Protocol):
    """Where finished records go (store, OTLP spans, metrics, logs).

    Thread contract: :meth:`emit` runs on the pipeline's worker thread, one record at a time,
    and must not block for long (a sink with slow I/O queues and works on its own thread);
    it may raise (counted, logged, the record still reaches the other sinks). :meth:`flush`
    and :meth:`close` are called by the pipeline at shutdown, from the thread that stops it.
    """

    def emit(self, record: CallRecord) -> None: ...

    def flush(self, timeout: float) -> bool:
        """Deliver what was emitted so far; ``True`` once it is delivered within ``timeout``."""
        ...

    def close(self) -> None: ...


class Enricher(Protocol):
    """Adds what the call's own bytes do not say (a price, content, retry or cache analysis).

    Runs on the worker thread, before the sinks, in the order given; may raise (logged).
    """

    def enrich(self, record: CallRecord, ctx: CallContext) -> None: ...


class Expander(Protocol):
    """Records that one call carries besides its own (the items of a batch's results download).

    Runs on the worker thread after the call's record is built and before any enricher; the
    records it returns then go through the enrichers and sinks like the call's own. May raise (logged).
    """

    def expand(self, record: CallRecord, ctx: CallContext) -> Iterable[tuple[CallRecord, CallContext]]:
        """Called before ``record`` reaches the enrichers (it may still change it); the records it
        yields are made one by one as the pipeline takes them."""
        ...


class Pipeline:
    def __init__(
        self,
        metrics: Metrics,
        estimator: TokenEstimator | None,
        sinks: list[RecordSink],
        enrichers: list[Enricher] | None = None,
        max_queue: int = 100_000,
        expanders: list[Expander] | None = None,
    ) -> None:
        self.metrics = metrics
        self.estimator = estimator
        self.sinks = sinks
        self.enrichers = enrichers or []
        self.expanders = expanders or []
        # A SimpleQueue (C: no Python-level Condition to notify on the event loop, once per call), bounded by
        # the pending count.
        self._q: queue.SimpleQueue[tuple[Capture, End] | None] = queue.SimpleQueue()
        self._max_queue = max_queue
        self._pending = 0
        self._lock = threading.Lock()
        self._sink_ms = 0.0  # the sinks' mean time per record (EWMA), part of each call's overhead
        self._thread = threading.Thread(target=self._run, name="llmtap-pipeline", daemon=True)
        self._thread.start()

    def submit(self, cap: Capture, end: End) -> None:
        """Called on the event loop: O(1), never blocks."""
        with self._lock:
            full = self._pending >= self._max_queue
            if not full:
                self._pending += 1
        if full:
            cap.release()
            self.metrics.dropped.labels("pipeline_queue_full").inc()
            return
        self._q.put((cap, end))

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            try:
                self.process(*item)
            finally:
                with self._lock:
                    self._pending -= 1

    def process(self, cap: Capture, end: End) -> None:
        """Build, expand, enrich, redact and emit one finished call, on the caller's thread (the recorder's)."""
        t0 = perf_counter_ns()
        try:
            rec, ctx = build(cap, end, self.estimator)
        except Exception:
            log.exception("building the record for %s failed", cap.facts.api)
            self.metrics.dropped.labels("build_error").inc()
            return
        del cap  # nothing after the record reaches back into the capture
        more: list[Iterable[tuple[CallRecord, CallContext]]] = []
        for expander in self.expanders:
            try:
                more.append(expander.expand(rec, ctx))
            except Exception:
                log.exception("expander %s failed for a %s call", type(expander).__name__, rec.api)
        self._finish(rec, ctx, t0)
        for records in more:
            try:
                for one, one_ctx in records:
                    self._finish(one, one_ctx)
            except Exception:
                log.exception("expanding a %s call failed", rec.api)

    def _finish(self, rec: CallRecord, ctx: CallContext, t0: int | None = None) -> None:
        for enricher in self.enrichers:
            try:
                enricher.enrich(rec, ctx)
            except Exception:
                log.exception("enricher %s failed for a %s call", type(enricher).__name__, rec.api)
        redact_record(rec)
        if rec.parse_error:
            log.warning("side parser stopped for a %s call: %s", rec.api, rec.parse_error)
        if t0 is not None and rec.overhead_ms is not None:
            # What llmtap adds per call: the proxy's loop and the recorder (in the record already), this
            # pipeline's work so far, and the sinks' mean time per record (a record cannot carry the
            # time it takes to store itself).
            rec.overhead_ms += (perf_counter_ns() - t0) / 1e6 + self._sink_ms
        s0 = perf_counter_ns()
        for sink in self.sinks:
            try:
                sink.emit(rec)
            except Exception:
                log.exception("sink %s failed", type(sink).__name__)
                self.metrics.dropped.labels("sink_error").inc()
        self._sink_ms += ((perf_counter_ns() - s0) / 1e6 - self._sink_ms) * 0.05

    def pending(self) -> int:
        with self._lock:
            return self._pending

    def drain(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while self.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.pending() == 0

    def close(self, timeout: float = 10.0, sink_timeout: float = 15.0) -> None:
        """Drain the queue, stop the worker, then flush and close each sink in order."""
        self.drain(timeout)
        self._q.put(None)
        self._thread.join(timeout)
        for sink in self.sinks:
            try:
                if not sink.flush(sink_timeout):
                    log.warning("sink %s did not flush within %.0fs", type(sink).__name__, sink_timeout)
                sink.close()
            except Exception:
                log.exception("closing sink %s failed", type(sink).__name__)
