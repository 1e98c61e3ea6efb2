"""Each package's ``__init__`` is its face: what it exports is pinned here (as httpx pins its own).

And the layering the tree promises holds in the code: nothing on the traffic path imports the
testing wing, and only ``intercept`` imports mitmproxy.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "proxy" / "llmtap"

FACES = {
    "llmtap": ["SCOPE_NAME", "__version__"],
    "llmtap.adapters": [
        "ADAPTERS",
        "GENERIC_API",
        "REGISTRY",
        "Adapter",
        "AnthropicBatches",
        "AnthropicMessages",
        "BatchItem",
        "BatchResults",
        "BedrockConverse",
        "BedrockInvoke",
        "ErrorInfo",
        "GeminiGenerateContent",
        "GenericJSON",
        "Observation",
        "OllamaChat",
        "OllamaGenerate",
        "OpenAIBatches",
        "OpenAIChat",
        "OpenAICompletions",
        "OpenAIEmbeddings",
        "OpenAIFileContent",
        "OpenAIRealtime",
        "OpenAIResponses",
        "OpenAIResponsesWS",
        "RealtimeResponse",
        "RequestInfo",
        "Route",
        "RouteMatch",
        "Turn",
        "Usage",
        "WSAdapter",
        "WSRouteMatch",
        "WS_REGISTRY",
        "route",
        "route_ws",
    ],
    "llmtap.decode": [
        "DECODERS",
        "EVENTSTREAM",
        "JSON",
        "JSON_ARRAY",
        "MAX_JSON_BODY",
        "NDJSON",
        "SSE",
        "BodyTooLarge",
        "ContentDecoder",
        "EventStreamDecoder",
        "EventStreamError",
        "EventStreamMessage",
        "Framer",
        "Framing",
        "FramingName",
        "Hook",
        "JSONArrayDecoder",
        "JSONBody",
        "NDJSONDecoder",
        "SSEDecoder",
        "SSEEvent",
        "UnsupportedEncoding",
        "WEBSOCKET",
        "WSMessageDecoder",
        "encode_event",
        "make_decoder",
    ],
    "llmtap.capture": ["CallContext", "Capture", "End", "RequestFacts", "TokenEstimator", "build"],
    "llmtap.telemetry": [
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
    ],
    "llmtap.store": [
        "DB_NAME_RE",
        "DEFAULT_DB",
        "SCHEMA_VERSION",
        "Backend",
        "StoreSink",
        "StoreURLError",
        "cluster_statements",
        "default_store_url",
        "open_backend",
        "retention_statement",
        "schema_sql",
        "schema_statements",
    ],
    "llmtap.admin": [
        "AdminAuth",
        "AdminServer",
        "AdminState",
        "QueryRefused",
        "Reads",
        "install_token",
        "read_install_token",
    ],
    "llmtap.alerts": ["STATE_FILE", "AlertThread", "Evaluator", "Event", "WebhookError", "check_webhook_url"],
    "llmtap.intercept": ["Fingerprinter", "allow_host_patterns", "parse_host_port"],
    "llmtap.cli": ["build_parser", "main"],
    "llmtap.testing.mock": [
        "CERT_NAMES",
        "GARBAGE",
        "HANDLERS",
        "HOSTS",
        "MockServer",
        "Reply",
        "ensure_certs",
        "plan",
        "serve",
    ],
}


@pytest.mark.parametrize("name", sorted(FACES))
def test_package_faces_are_pinned(name: str) -> None:
    module = importlib.import_module(name)
    assert sorted(module.__all__) == sorted(FACES[name])
    for symbol in module.__all__:
        assert hasattr(module, symbol), f"{name}.__all__ names {symbol}, which it does not define"


def _imports(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved against the package)."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = list(rel.parts[:-1])  # a module's package; an __init__'s is its own folder
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
            elif node.module:
                out.add(node.module)
    return out


TRAFFIC_PATH = ("intercept", "decode", "adapters", "capture", "telemetry", "store")


def _files(*stages: str) -> list[Path]:
    files = [PKG / "pipeline.py", PKG / "record.py", PKG / "providers.py"] if not stages else []
    for stage in stages or TRAFFIC_PATH:
        files += sorted((PKG / stage).rglob("*.py"))
    return files


def test_the_traffic_path_never_imports_the_testing_wing() -> None:
    for path in _files():
        bad = {m for m in _imports(path) if m.startswith("llmtap.testing")}
        assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_only_intercept_imports_mitmproxy() -> None:
    for path in PKG.rglob("*.py"):
        if (PKG / "intercept") in path.parents:
            continue
        bad = {m for m in _imports(path) if m.split(".")[0] == "mitmproxy"}
        assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_decoders_and_adapters_are_pure() -> None:
    """No I/O modules in the pure stages: they see bytes and values, nothing else."""
    io = {"socket", "ssl", "subprocess", "threading", "asyncio", "http", "urllib.request", "os"}
    for path in _files("decode", "adapters"):
        bad = {m for m in _imports(path) if m.split(".")[0] in io or m in io}
        assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_no_module_is_over_400_lines() -> None:
    for path in PKG.rglob("*.py"):
        n = len(path.read_text().splitlines())
        assert n <= 420, f"{path.relative_to(PKG)} has {n} lines"
