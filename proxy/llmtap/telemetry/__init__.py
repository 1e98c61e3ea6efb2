"""Telemetry: what a finished record becomes.

:mod:`.semconv` (record ↔ GenAI span attributes ↔ ``otel_traces`` row), :mod:`.spans` (OTLP
export), :mod:`.metrics` (Prometheus), :mod:`.pricing` (cost), :mod:`.retries` (``attempt``),
:mod:`.cache_miss` (why a prompt cache missed, and its cost), :mod:`.content` (opt-in
content capture), :mod:`.redact` (secrets out of everything kept), :mod:`.logs`.

The face loads its modules on first use: a proxy worker imports :mod:`.logs` (and with it
:mod:`.redact`) without paying for prometheus-client or the price data it never uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cache_miss import CacheMissAnalyzer
    from .content import ContentCapture
    from .logs import LogSink
    from .metrics import Metrics, MetricsSink
    from .pricing import PriceFileError, Pricer, load_price_file
    from .redact import redact, redact_record
    from .retries import RetryDetector

_HOME = {
    "CacheMissAnalyzer": ".cache_miss",
    "ContentCapture": ".content",
    "LogSink": ".logs",
    "Metrics": ".metrics",
    "MetricsSink": ".metrics",
    "PriceFileError": ".pricing",
    "Pricer": ".pricing",
    "load_price_file": ".pricing",
    "redact": ".redact",
    "redact_record": ".redact",
    "RetryDetector": ".retries",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


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
