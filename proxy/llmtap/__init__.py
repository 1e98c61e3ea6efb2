"""llmtap: an observability sidecar for LLM API traffic."""

__version__ = "0.1.0"
SCOPE_NAME = "llmtap"
