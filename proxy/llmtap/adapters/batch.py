"""What the batch APIs share: the results of one download, item by item, and its framing.

A batch's calls are not made on the wire llmtap sees: they come back, all at once, in a results
file (OpenAI ``GET /v1/files/{output_file_id}/content``, Anthropic
``GET /v1/messages/batches/{id}/results``), one JSON line per request. The batch adapters read
each line with the item's own adapter (its ``on_json``, as for a direct call) and keep only what
a record needs (:class:`BatchItem`: usage, model, ids, finish, error — never the text), so a
results file of any size costs a bounded amount of memory (:data:`MAX_BATCH_ITEMS`). The capture
layer turns each item into a row of its own (:mod:`llmtap.capture.batch`).

The create and poll calls are adapters too (they are recorded, never priced: ``billable`` is
false); what they say about the batch (its id, its output file) is kept in :class:`BatchResults`
so that a later download is grouped under its batch id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..decode import Framing, NDJSONDecoder
from ..record import Api, FinishReason, Operation
from .base import Adapter, ErrorInfo, Usage, as_str

MAX_BATCH_ITEMS = 100_000  # items kept per results download (Anthropic's batch limit); the rest are counted
MAX_RESULT_LINE = 16 * 1024 * 1024  # a results line (one whole response) larger than this is skipped

# A results file is one JSON value per line, downloaded (not streamed: no per-line timings).
JSONL = Framing("ndjson", lambda _: NDJSONDecoder(MAX_RESULT_LINE), "on_object", False)


@dataclass(slots=True)
class BatchItem:
    """One request of a batch, as its results line reports it."""

    custom_id: str
    api: Api  # the wire API of the request (openai.chat_completions, anthropic.messages, …)
    operation: Operation
    status_code: int  # the item's own HTTP status (Anthropic: 200 succeeded, 0 otherwise)
    request_id: str = ""
    response_id: str = ""
    response_model: str = ""
    usage: Usage | None = None
    finish: FinishReason = ""
    finish_raw: str = ""
    service_tier: str = ""
    tool_calls: int = 0
    created: float | None = None  # unix seconds, when the body says when it was made
    error: ErrorInfo | None = None
    ended: str = ""  # Anthropic: canceled / expired (never processed)


@dataclass(slots=True)
class BatchResults:
    """What a batch call said about its batch: the ids it names, and the items of a results file."""

    batch_id: str = ""
    file_id: str = ""  # the file this call downloaded (OpenAI)
    output_file_ids: tuple[str, ...] = ()  # output/error files a create or poll response names
    endpoint: str = ""  # the batch's endpoint (OpenAI: /v1/chat/completions, …)
    items: list[BatchItem] = field(default_factory=list)
    dropped: int = 0  # items past MAX_BATCH_ITEMS

    def add(self, item: BatchItem) -> None:
        if len(self.items) < MAX_BATCH_ITEMS:
            self.items.append(item)
        else:
            self.dropped += 1


def read_item(adapter: type[Adapter], body: Any, custom_id: str, status: int, t: float) -> BatchItem:
    """The item whose response body is ``body``, read by the adapter of its API (as a direct call's
    body would be); its text is not kept."""
    a = adapter()
    a.on_json(body, t)
    obs = a.obs
    created = body.get("created", body.get("created_at")) if isinstance(body, dict) else None
    return BatchItem(
        custom_id=custom_id,
        api=adapter.api,
        operation=adapter.operation,
        status_code=status,
        response_id=obs.response_id,
        response_model=obs.response_model,
        usage=obs.usage,
        finish=obs.finish,
        finish_raw=obs.finish_raw,
        service_tier=obs.service_tier,
        tool_calls=len(obs.tool_call_keys),
        created=float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else None,
        error=obs.error,
    )


def custom_id(line: dict[str, Any]) -> str:
    return as_str(line.get("custom_id"))[:256]
