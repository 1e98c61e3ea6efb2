"""Batch results → one record per item (adapters + capture + the expander), on the mock's batch replies."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmtap.capture.batch import BatchExpander
from llmtap.testing import builders
from llmtap.testing.mock import batches


def capture(
    method: str, host: str, path: str, body: dict[str, Any] | None, reply: Any, cuts: list[int] | None = None
) -> Any:
    hdrs = ("anthropic-version",) if "anthropic" in host else ()
    cap = builders.capture(path, body or b"", host=host, method=method, request_headers=hdrs)
    builders.respond(cap, reply.status, reply.headers, builders.split(b"".join(reply.chunks), cuts))
    return builders.finish(cap)


def openai_batch(n: int, bad: int | None = None) -> tuple[str, str]:
    lines = [
        {
            "custom_id": f"r{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": batches.BAD_MODEL if i == bad else "gpt-4o-mini", "messages": []},
        }
        for i in range(n)
    ]
    boundary = "xyz"
    raw = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="b.jsonl"\r\n'
        "Content-Type: application/jsonl\r\n\r\n"
        + "".join(json.dumps(x) + "\n" for x in lines)
        + f"\r\n--{boundary}--\r\n"
    ).encode()
    up = json.loads(b"".join(batches.upload({"content-type": f"multipart/form-data; boundary={boundary}"}, raw).chunks))
    created = batches.openai_batches("POST", "/v1/batches", {"input_file_id": up["id"]})
    assert created is not None
    bid = json.loads(b"".join(created.chunks))["id"]
    return bid, up["id"]


def test_openai_output_file_is_one_batch_row_per_item_grouped_by_the_polled_batch() -> None:
    bid, _ = openai_batch(3, bad=2)
    ex = BatchExpander()
    poll = batches.openai_batches("GET", f"/v1/batches/{bid}", {})
    rec, ctx = capture("GET", "api.openai.com", f"/v1/batches/{bid}", None, poll)
    assert list(ex.expand(rec, ctx)) == [] and rec.batch_id == bid and rec.usage_source == "none"
    out = json.loads(b"".join(poll.chunks))["output_file_id"]
    path = f"/v1/files/{out}/content"
    reply = batches.openai_batches("GET", path, {})
    rec, ctx = capture("GET", "api.openai.com", path, None, reply)
    items = [r for r, _ in ex.expand(rec, ctx)]
    assert rec.cost_usd is None and rec.usage_source == "none" and rec.batch_id == bid
    assert [(r.api, r.billing, r.batch_id, r.outcome) for r in items] == [
        ("openai.chat_completions", "batch", bid, "ok"),
        ("openai.chat_completions", "batch", bid, "ok"),
        ("openai.chat_completions", "batch", bid, "error"),
    ]
    assert items[0].input_tokens == 31 and items[0].usage_source == "provider"
    assert [r.request_id for r in items] == ["req_mock_batch_0", "req_mock_batch_1", "req_mock_batch_2"]
    assert items[2].status_code == 404 and items[2].error_code == "model_not_found"
    assert all(r.trace_id == rec.trace_id and r.parent_span_id == rec.span_id for r in items)
    # the same file downloaded again is not recorded twice
    rec2, ctx2 = capture("GET", "api.openai.com", path, None, batches.openai_batches("GET", path, {}))
    assert list(ex.expand(rec2, ctx2)) == []


def test_anthropic_results_are_one_batch_row_per_item() -> None:
    reqs = [
        {"custom_id": f"a{i}", "params": {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": []}}
        for i in range(2)
    ]
    created = batches.anthropic_batches("POST", "/v1/messages/batches", {"requests": reqs})
    assert created is not None
    bid = json.loads(b"".join(created.chunks))["id"]
    path = f"/v1/messages/batches/{bid}/results"
    rec, ctx = capture("GET", "api.anthropic.com", path, None, batches.anthropic_batches("GET", path, {}))
    items = [r for r, _ in BatchExpander().expand(rec, ctx)]
    assert [(r.api, r.billing, r.batch_id, r.service_tier) for r in items] == [
        ("anthropic.messages", "batch", bid, "batch")
    ] * 2
    assert items[0].cache_read_tokens == 3400 and items[0].input_tokens == 28 + 1200 + 3400
    assert rec.api == "anthropic.message_batches" and rec.usage_source == "none"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=12))
def test_any_chunking_of_a_results_file_gives_the_same_items(cuts: list[int]) -> None:
    bid, _ = openai_batch(4, bad=1)
    poll = batches.openai_batches("GET", f"/v1/batches/{bid}", {})
    assert poll is not None
    path = f"/v1/files/{json.loads(b''.join(poll.chunks))['output_file_id']}/content"

    def items(c: list[int]) -> list[tuple[Any, ...]]:
        rec, ctx = capture("GET", "api.openai.com", path, None, batches.openai_batches("GET", path, {}), c)
        return [(r.request_id, r.input_tokens, r.output_tokens, r.outcome) for r, _ in BatchExpander().expand(rec, ctx)]

    assert items(cuts) == items([]) and len(items([])) == 4
