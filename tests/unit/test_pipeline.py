"""The worker: a results download yields its items through the enrichers and sinks; a failing
expander or enricher loses nothing else."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from llmtap.capture import Capture, End
from llmtap.capture.batch import BatchExpander
from llmtap.pipeline import Pipeline
from llmtap.record import CallRecord
from llmtap.telemetry import Metrics, Pricer
from llmtap.testing import builders
from llmtap.testing.mock import batches


class Collect:
    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def emit(self, r: CallRecord) -> None:
        self.records.append(r)

    def flush(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        pass


class Broken:
    def expand(self, rec: CallRecord, ctx: Any) -> Iterator[tuple[CallRecord, Any]]:
        raise RuntimeError("boom")

    def enrich(self, rec: CallRecord, ctx: Any) -> None:
        raise RuntimeError("boom")


def results_download() -> Capture:
    reqs = [
        {"custom_id": f"a{i}", "params": {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": []}}
        for i in range(3)
    ]
    created = batches.anthropic_batches("POST", "/v1/messages/batches", {"requests": reqs})
    assert created is not None
    path = f"/v1/messages/batches/{json.loads(b''.join(created.chunks))['id']}/results"
    reply = batches.anthropic_batches("GET", path, {})
    assert reply is not None
    cap = builders.capture(path, host="api.anthropic.com", method="GET", request_headers=("anthropic-version",))
    return builders.respond(cap, 200, reply.headers, [b"".join(reply.chunks)])


def test_items_go_through_enrichers_and_sinks_and_failures_are_contained() -> None:
    sink = Collect()
    p = Pipeline(Metrics(), None, [sink], [Broken(), Pricer()], expanders=[Broken(), BatchExpander()])  # type: ignore[list-item]
    p.submit(results_download(), End("complete", time.monotonic()))
    p.close()
    download, *items = sink.records
    assert download.api == "anthropic.message_batches" and download.cost_usd is None
    assert len(items) == 3 and all(r.billing == "batch" and r.cost_usd is not None for r in items)
