"""OTLP export of one CLIENT span per call, through the OpenTelemetry SDK.

The span carries the call's real start and end times and the ids already on the
record (so the span, the ``otel_traces`` row and ``llm_calls`` agree), as the child
of the application's span when the request carried a ``traceparent``. Export goes
through a BatchSpanProcessor: bounded queue, its own thread, never on the traffic
path. Each service gets its own TracerProvider, since ``service.name`` is a resource
attribute; they share one processor and exporter.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .. import SCOPE_NAME, __version__
from ..record import CallRecord
from .semconv import span_attributes, span_name

if TYPE_CHECKING:
    from ..config import Otlp

log = logging.getLogger("llmtap.spans")
MAX_PROVIDERS = 256


class _PresetIds(IdGenerator):
    """Hands the SDK the ids already chosen for the call (set per span, same thread)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def set(self, trace_id: int, span_id: int) -> None:
        self._local.ids = (trace_id, span_id)

    def generate_trace_id(self) -> int:
        return int(self._local.ids[0])

    def generate_span_id(self) -> int:
        return int(self._local.ids[1])


def otlp_exporter(endpoint: str | None, otlp: Otlp) -> SpanExporter:
    """An OTLP exporter honouring the standard OTEL_EXPORTER_OTLP_* variables (``otlp``: the ones
    llmtap reads itself, :class:`llmtap.config.Otlp`; the exporter reads the others).

    ``endpoint`` is a base URL like OTEL_EXPORTER_OTLP_ENDPOINT (``/v1/traces`` is added for
    http/protobuf); OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, when set, wins as the spec says.
    """
    protocol, traces_endpoint = otlp.protocol, otlp.traces_endpoint
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        target = None if traces_endpoint else endpoint
        return GrpcExporter(endpoint=target, insecure=True if target and target.startswith("http://") else None)
    if protocol not in ("http/protobuf", "http"):
        raise ValueError(f"unsupported OTLP protocol {protocol!r} (use http/protobuf or grpc)")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    if traces_endpoint or not endpoint:
        return HttpExporter()
    return HttpExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")


class SpanSink:
    """A :class:`~llmtap.pipeline.RecordSink`: one span per record, exported in batches on the SDK's thread."""

    def __init__(self, exporter: SpanExporter, resource: dict[str, str] | None = None) -> None:
        self._ids = _PresetIds()
        self._processor = BatchSpanProcessor(exporter)
        self._resource = resource or {}
        self._providers: dict[str, TracerProvider] = {}
        self._lock = threading.Lock()

    def _tracer(self, service: str) -> trace.Tracer:
        with self._lock:
            provider = self._providers.get(service)
            if provider is None:
                if len(self._providers) >= MAX_PROVIDERS:
                    service = "_other"
                    provider = self._providers.get(service)
                if provider is None:
                    provider = TracerProvider(
                        resource=Resource.create({**self._resource, "service.name": service}),
                        id_generator=self._ids,
                        sampler=ALWAYS_ON,
                    )
                    provider.add_span_processor(self._processor)
                    self._providers[service] = provider
        return provider.get_tracer(SCOPE_NAME, __version__)

    def emit(self, r: CallRecord) -> None:
        start_ns = round(r.timestamp * 1e9)
        end_ns = start_ns + round(r.duration_ms * 1e6)
        parent = r.parent_span_id
        ctx: Any = None
        if parent:
            ctx = trace.set_span_in_context(
                NonRecordingSpan(
                    SpanContext(int(r.trace_id, 16), int(parent, 16), is_remote=True, trace_flags=TraceFlags(1))
                )
            )
        self._ids.set(int(r.trace_id, 16), int(r.span_id, 16))
        span = self._tracer(r.service).start_span(
            span_name(r), context=ctx, kind=SpanKind.CLIENT, attributes=span_attributes(r), start_time=start_ns
        )
        if r.outcome == "error":
            span.set_status(Status(StatusCode.ERROR, r.error_message or r.error_type))
        span.end(end_time=end_ns)

    def flush(self, timeout: float) -> bool:
        return bool(self._processor.force_flush(int(timeout * 1000)))

    def close(self) -> None:
        try:
            self._processor.shutdown()
        except Exception as e:
            log.warning("span exporter shutdown: %s", e)
