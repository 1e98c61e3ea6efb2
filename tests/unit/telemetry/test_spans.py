"""OTLP exporter selection from the standard variables."""

from __future__ import annotations

import pytest


def test_exporter_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    from llmtap.config import Environment
    from llmtap.telemetry.spans import otlp_exporter

    for k in (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ):
        monkeypatch.delenv(k, raising=False)
    http = otlp_exporter("http://collector:4318", Environment.of({}).otlp)
    assert isinstance(http, Http) and http._endpoint == "http://collector:4318/v1/traces"
    grpc = Environment.of({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}).otlp
    assert isinstance(otlp_exporter("http://collector:4317", grpc), Grpc)
    thrift = Environment.of({"OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"}).otlp
    with pytest.raises(ValueError):
        otlp_exporter("http://x", thrift)
