"""Batch results → one record per item (the pipeline's expander; worker thread).

A results download (:mod:`llmtap.adapters.batch`) is recorded as the call it is (unpriced), and
each of its items as a row of its own: the item's API, model, usage, finish and error, its
request and response ids, ``billing = batch`` (so it is priced at the batch price), and the
batch id it belongs to. The items are children of the download's span (same trace, the
download's span as parent); their timestamp is the item's own when the body says when it was
made, else the download's; their duration is unknown (0).

State, bounded (LRU, :data:`MAX_BATCHES` entries each): the batch id of each output file a
create or poll response named (an OpenAI download names only its file), and how many items of
each results file were already recorded, so a file downloaded twice is recorded once (a second,
complete download after a cut one records the rest). A download whose batch was never polled
through this sidecar is grouped under its file id.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from ..adapters.batch import BatchItem
from ..record import CallRecord, cap_message
from . import taxonomy
from .build import CallContext

MAX_BATCHES = 10_000


class _LRU(OrderedDict[str, Any]):
    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap

    def put(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.cap:
            self.popitem(last=False)


class BatchExpander:
    """The :class:`~llmtap.pipeline.Expander` for batch results."""

    def __init__(self, max_batches: int = MAX_BATCHES) -> None:
        self._file_batch = _LRU(max_batches)  # output/error file id → batch id
        self._recorded = _LRU(max_batches)  # results file → items recorded so far
        self._lock = threading.Lock()

    def expand(self, rec: CallRecord, ctx: CallContext) -> Iterator[tuple[CallRecord, CallContext]]:
        res = ctx.batch
        if res is None:
            return iter(())
        with self._lock:
            for f in res.output_file_ids:
                if res.batch_id:
                    self._file_batch.put(f, res.batch_id)
            batch_id = res.batch_id or self._file_batch.get(res.file_id) or res.file_id
            rec.batch_id = batch_id[:200]
            if not res.items:
                return iter(())
            key = f"{res.file_id or res.batch_id}"
            done = int(self._recorded.get(key, 0))
            self._recorded.put(key, max(done, len(res.items)))
        if res.dropped:
            rec.batch_items_dropped = res.dropped
        rec.batch_items = len(res.items)
        items = res.items[done:]
        return ((item_record(rec, item, batch_id), CallContext(None, "", [])) for item in items)


def item_record(parent: CallRecord, item: BatchItem, batch_id: str) -> CallRecord:
    """The row of one batch item, under the download that carried it."""
    r = CallRecord(
        timestamp=item.created if item.created and 0 < item.created <= parent.timestamp else parent.timestamp,
        trace_id=parent.trace_id,
        span_id=secrets.token_hex(8),
        service=parent.service,
        provider=parent.provider,
        api=item.api,
        operation=item.operation,
        server_address=parent.server_address,
        server_port=parent.server_port,
        request_model=item.response_model,
        response_model=item.response_model,
        request_id=item.request_id,
        response_id=item.response_id,
        status_code=item.status_code,
        finish_reason=item.finish,
        finish_reason_raw=item.finish_raw,
        tool_calls=item.tool_calls,
        user_id=parent.user_id,
        session_id=parent.session_id,
        tenant=parent.tenant,
        feature=parent.feature,
        prompt_version=parent.prompt_version,
        api_key_id=parent.api_key_id,
        transport=parent.transport,
        connection_id=parent.connection_id,
        client_name=parent.client_name,
        client_version=parent.client_version,
        service_tier=(item.service_tier or "batch")[:64],
        billing="batch",
        batch_id=batch_id[:200],
    )
    r.parent_span_id = parent.span_id
    r.batch_custom_id = item.custom_id
    err = item.error
    if item.ended in ("canceled", "expired"):
        r.outcome, r.finish_reason = ("cancelled", "cancelled") if item.ended == "canceled" else ("error", "")
        r.error_type = "" if item.ended == "canceled" else "timeout"
        r.error_code = item.ended
    elif err is not None:
        r.outcome = "error"
        r.error_type = taxonomy.classify(item.status_code, err.code, err.type, err.message, err.status)
        r.error_code, r.error_message = err.code[:200], cap_message(err.message)
        r.finish_reason = "error" if 200 <= item.status_code < 300 else ""
    if item.usage is not None:
        u = item.usage
        r.usage_source = "provider"
        r.input_tokens, r.output_tokens = u.input, u.output
        r.cache_read_tokens, r.cache_write_tokens, r.reasoning_tokens = u.cache_read, u.cache_write, u.reasoning
        r.cache_write_1h_tokens = min(u.cache_write_1h, u.cache_write)
    return r
