"""Test helpers: the process harness (llmtap.harness) plus test-only servers."""

from __future__ import annotations

import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from llmtap.testing.harness import (
    LLMTAP,
    ClickHouseHTTP,
    Mock,
    Sidecar,
    free_port,
    start_mock,
    start_sidecar,
    stop,
    wait_healthy,
)

__all__ = [
    "LLMTAP",
    "ClickHouseHTTP",
    "Mock",
    "OtlpReceiver",
    "Sidecar",
    "free_port",
    "session_id",
    "start_mock",
    "start_sidecar",
    "stop",
    "wait_healthy",
]


def openai_client(sc: Sidecar, key: str = "sk-test") -> Any:
    """The official OpenAI SDK pointed at ``sc`` explicitly (proxy + its CA bundle), without env vars."""
    import ssl

    import openai

    return openai.OpenAI(
        api_key=key,
        max_retries=0,
        http_client=openai.DefaultHttpxClient(
            proxy=sc.proxy_url, verify=ssl.create_default_context(cafile=str(sc.bundle))
        ),
    )


def session_id() -> str:
    return uuid.uuid4().hex


class OtlpReceiver:
    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.spans: list[tuple[dict[str, str], Span]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append(body)
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                for rs in req.resource_spans:
                    res = {a.key: a.value.string_value for a in rs.resource.attributes}
                    for ss in rs.scope_spans:
                        for sp in ss.spans:
                            outer.spans.append((res | {"scope": ss.scope.name}, sp))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def span(self, span_id: str, timeout: float = 10.0) -> tuple[dict[str, str], Span]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for res, sp in self.spans:
                if sp.span_id.hex() == span_id:
                    return res, sp
            time.sleep(0.05)
        raise AssertionError(f"no span {span_id} received")

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
