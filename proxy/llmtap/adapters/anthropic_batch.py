"""Anthropic Message Batches: the batch calls and the results download.

``POST /v1/messages/batches`` creates a batch, ``GET /v1/messages/batches/{id}`` polls it (its
``results_url`` once ended), ``GET /v1/messages/batches/{id}/results`` downloads the results:
JSON lines of ``{"custom_id", "result": {"type": "succeeded", "message": {…}}}`` (or
``errored`` with an error response, ``canceled``, ``expired``). Each line becomes an item
(:mod:`.batch`) read by :class:`~.anthropic_messages.AnthropicMessages`; the batch id is the path's.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ..decode import JSON, Framing
from ..providers import ProviderName
from .anthropic_messages import AnthropicMessages
from .base import Adapter, ErrorInfo, Route, as_str, d, error_from_body
from .batch import JSONL, BatchItem, BatchResults, custom_id, read_item

_ANTHROPIC: frozenset[ProviderName | None] = frozenset({"anthropic", None})
_HEADERS = ("anthropic-version", "x-api-key")
_BATCH_ID = re.compile(r"/v1/messages/batches/([^/?]+)", re.IGNORECASE)


class AnthropicBatches(Adapter):
    """Create, poll, cancel (recorded with the batch id, never priced) and the results download."""

    api = "anthropic.message_batches"
    operation = "batch"
    billable = False  # the calls themselves; the items of a results download are priced
    routes: ClassVar[tuple[Route, ...]] = (
        Route(r"/v1/messages/batches$", providers=_ANTHROPIC, or_headers=_HEADERS),
        Route(r"/v1/messages/batches/[^/]+/cancel$", providers=_ANTHROPIC, or_headers=_HEADERS),
        Route(r"/v1/messages/batches/[^/]+(/results)?$", providers=_ANTHROPIC, or_headers=_HEADERS, method="GET"),
    )
    default_provider = "anthropic"

    def __init__(self) -> None:
        super().__init__()
        self.batch: BatchResults = BatchResults()

    def framing(self, content_type: str, path: str) -> Framing:
        bare = path.split("?", 1)[0].rstrip("/")
        return JSONL if bare.endswith("/results") and "application/json" not in content_type else JSON

    def on_target(self, path: str) -> None:
        m = _BATCH_ID.search(path.split("?", 1)[0])
        if m:
            self.batch.batch_id = m.group(1)

    def on_json(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict) or self.error_in_body(obj):
            return
        if "custom_id" in obj:  # a one-line results file served as JSON
            self.on_object(obj, t)
            return
        self.obs.terminal = True
        if obj.get("type") == "message_batch":
            self.batch.batch_id = as_str(obj.get("id")) or self.batch.batch_id
            self.obs.response_id = self.batch.batch_id

    def on_object(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict) or "custom_id" not in obj:
            return
        result = d(obj, "result")
        kind = as_str(result.get("type"))
        cls = AnthropicMessages
        if kind == "succeeded":
            item = read_item(cls, d(result, "message"), custom_id(obj), 200, t)
        else:
            err = error_from_body(d(result, "error")) if kind == "errored" else None
            item = BatchItem(custom_id(obj), cls.api, cls.operation, 0, error=err or ErrorInfo(), ended=kind)
            item.request_id = as_str(d(result, "error").get("request_id"))[:200]
        self.batch.add(item)
