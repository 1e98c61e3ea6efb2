"""``llmtap mock-provider``: an HTTPS server replaying realistic LLM API responses (tests, demo, benchmarks).

One module per provider family (:mod:`.openai`, :mod:`.anthropic`, :mod:`.gemini`,
:mod:`.bedrock`, :mod:`.ollama`), the shared reply and wire helpers (:mod:`.common`), its TLS
(:mod:`.certs`) and the server (:mod:`.server`).
"""

from __future__ import annotations

from .certs import CERT_NAMES, HOSTS, ensure_certs
from .common import Reply
from .openai import GARBAGE
from .server import HANDLERS, MockServer, plan, serve

__all__ = ["CERT_NAMES", "GARBAGE", "HANDLERS", "HOSTS", "MockServer", "Reply", "ensure_certs", "plan", "serve"]
