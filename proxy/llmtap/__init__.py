"""llmtap: an observability sidecar for LLM API traffic.

The package is laid out along the data flow (see docs/architecture.md): ``intercept`` (the
event loop, the only mitmproxy importer) → ``decode`` → ``adapters`` → ``capture`` →
``pipeline`` → ``telemetry`` / ``store``; ``admin`` serves what was stored; ``app`` composes
a sidecar; ``cli`` parses and dispatches; ``testing`` is shipped tooling, off the traffic path.
"""

__version__ = "0.1.0"
SCOPE_NAME = "llmtap"

__all__ = ["SCOPE_NAME", "__version__"]
