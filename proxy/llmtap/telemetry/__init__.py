"""Telemetry: what a finished record becomes.

:mod:`.semconv` (record ↔ GenAI span attributes ↔ ``otel_traces`` row), :mod:`.spans` (OTLP
export), :mod:`.metrics` (Prometheus), :mod:`.pricing` (cost), :mod:`.retries` (``attempt``),
:mod:`.cache_miss` (why a prompt cache missed, and its cost), :mod:`.content` (opt-in
content capture), :mod:`.redact` (secrets out of everything kept), :mod:`.logs`.
"""

from __future__ import annotations

from .cache_miss import CacheMissAnalyzer
from .content import ContentCapture
from .logs import LogSink
from .metrics import Metrics, MetricsSink
from .pricing import PriceFileError, Pricer, load_price_file
from .redact import redact, redact_record
from .retries import RetryDetector

__all__ = [
    "CacheMissAnalyzer",
    "ContentCapture",
    "LogSink",
    "Metrics",
    "MetricsSink",
    "PriceFileError",
    "Pricer",
    "RetryDetector",
    "load_price_file",
    "redact",
    "redact_record",
]
