"""OpenAI Batch API (and Azure OpenAI's): the batch calls and the results download.

``POST /v1/batches`` creates a batch, ``GET /v1/batches/{id}`` polls it (its ``output_file_id``
and ``error_file_id`` once done), ``GET /v1/files/{file_id}/content`` downloads a file: for a
batch's output or error file, JSON lines of ``{"id", "custom_id", "response": {"status_code",
"request_id", "body"}, "error"}``. Each line becomes an item (:mod:`.batch`) read by the adapter
of its body's API; other files downloaded this way have no such lines and yield no items.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ..decode import JSON, Framing
from ..providers import ProviderName
from .base import Adapter, ErrorInfo, Route, as_int, as_str, d, error_from_body
from .batch import JSONL, BatchItem, BatchResults, custom_id, read_item
from .openai_chat import OpenAIChat
from .openai_completions import OpenAICompletions
from .openai_embeddings import OpenAIEmbeddings
from .openai_responses import OpenAIResponses

_PREFIX = r"^(?:/openai)?(?:/v1)?"  # api.openai.com/v1, Azure's /openai and /openai/v1
_OPENAI: frozenset[ProviderName | None] = frozenset({"openai", "azure.ai.openai", None})
# The item's API, from its body's ``object`` (else from the batch's endpoint).
_BY_OBJECT: dict[str, type[Adapter]] = {
    "chat.completion": OpenAIChat,
    "response": OpenAIResponses,
    "text_completion": OpenAICompletions,
    "list": OpenAIEmbeddings,
}
_BY_ENDPOINT: dict[str, type[Adapter]] = {
    "/v1/chat/completions": OpenAIChat,
    "/v1/responses": OpenAIResponses,
    "/v1/completions": OpenAICompletions,
    "/v1/embeddings": OpenAIEmbeddings,
}
_BATCH_ID = re.compile(_PREFIX + r"/batches/([^/?]+)", re.IGNORECASE)
_FILE_ID = re.compile(_PREFIX + r"/files/([^/?]+)/content", re.IGNORECASE)


class OpenAIBatches(Adapter):
    """Create, poll, cancel: recorded with the batch id, never priced."""

    api = "openai.batches"
    operation = "batch"
    billable = False
    routes: ClassVar[tuple[Route, ...]] = (
        Route(_PREFIX + r"/batches$", providers=_OPENAI),
        Route(_PREFIX + r"/batches/[^/]+/cancel$", providers=_OPENAI),
        Route(_PREFIX + r"/batches/[^/]+$", providers=_OPENAI, method="GET"),
    )
    default_provider = "openai"

    def __init__(self) -> None:
        super().__init__()
        self.batch: BatchResults = BatchResults()

    def on_target(self, path: str) -> None:
        m = _BATCH_ID.search(path.split("?", 1)[0])
        if m:
            self.batch.batch_id = m.group(1)

    def on_json(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict) or self.error_in_body(obj):
            return
        self.obs.terminal = True
        if obj.get("object") == "batch":
            self.batch.batch_id = as_str(obj.get("id")) or self.batch.batch_id
            self.obs.response_id = self.batch.batch_id
            self.batch.endpoint = as_str(obj.get("endpoint"))
            self.batch.output_file_ids = tuple(
                f for f in (as_str(obj.get("output_file_id")), as_str(obj.get("error_file_id"))) if f
            )
            self.obs.response_model = as_str(obj.get("model"))


class OpenAIFileContent(Adapter):
    """A file download; a batch's output or error file yields one item per line."""

    api = "openai.files"
    operation = "batch"
    billable = False  # the download itself; its items are priced
    routes: ClassVar[tuple[Route, ...]] = (Route(_PREFIX + r"/files/[^/]+/content$", providers=_OPENAI, method="GET"),)
    default_provider = "openai"

    def __init__(self) -> None:
        super().__init__()
        self.batch: BatchResults = BatchResults()

    def framing(self, content_type: str, path: str) -> Framing:
        return JSON if "application/json" in content_type else JSONL

    def on_target(self, path: str) -> None:
        m = _FILE_ID.search(path.split("?", 1)[0])
        if m:
            self.batch.file_id = m.group(1)

    def on_json(self, obj: Any, t: float) -> None:  # a one-line file served as JSON
        self.on_object(obj, t)

    def on_object(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict) or "custom_id" not in obj:
            return
        resp = d(obj, "response")
        body = resp.get("body")
        status = as_int(resp.get("status_code"))
        cls = _BY_OBJECT.get(as_str(body.get("object")) if isinstance(body, dict) else "")
        cls = cls or _BY_ENDPOINT.get(self.batch.endpoint, OpenAIChat)
        if status and 200 <= status < 300 and isinstance(body, dict):
            item = read_item(cls, body, custom_id(obj), status, t)
        else:  # a request the batch could not run: its error (a status and body, or an error line)
            err = error_from_body(body, status) if isinstance(body, dict) else None
            line_err = obj.get("error")
            if err is None and isinstance(line_err, dict):
                err = ErrorInfo(code=as_str(line_err.get("code")), message=as_str(line_err.get("message"))[:1000])
            item = BatchItem(custom_id(obj), cls.api, cls.operation, status, error=err or ErrorInfo())
        item.request_id = as_str(resp.get("request_id"))[:200]
        self.batch.add(item)
