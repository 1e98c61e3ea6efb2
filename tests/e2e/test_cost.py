"""Cost truth through a real ``llmtap run`` with the official SDKs against ``llmtap mock-provider``.

Every expected cost is computed here with genai-prices from the usage the provider (the mock)
reported to the SDK, never read back from llmtap.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from genai_prices import Usage, calc_price
from helpers import Mock, Sidecar, session_id, start_sidecar, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

GATEWAY = "api.gateway.internal"
TTL_S = 4.0  # stands for the 5-minute prompt-cache TTL, in the mock and in the sidecar alike


@pytest.fixture(scope="module")
def cost(mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    sc = start_sidecar(
        tmp_path_factory.mktemp("cost") / "data",
        mock,
        "--intercept",
        f"{GATEWAY}:443",
        "--connect-to",
        f"{GATEWAY}:443:127.0.0.1:{mock.port}",
        env={"LLMTAP_TEST_CACHE_TTL": f"{TTL_S:g}s"},
    )
    yield sc
    stop(sc.proc)


def _tls(sc: Sidecar) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(sc.bundle))


def oai(sc: Sidecar, sid: str, retries: int = 0, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="sk-test-cost",
        max_retries=retries,
        http_client=openai.DefaultHttpxClient(proxy=sc.proxy_url, verify=_tls(sc)),
        default_headers={"x-llmtap-session": sid},
        **kw,
    )


def ant(sc: Sidecar, sid: str, **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="sk-ant-test-cost-" + sid[:8],
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(proxy=sc.proxy_url, verify=_tls(sc)),
        default_headers={"x-llmtap-session": sid, **headers},
    )


def price(usage: Usage, model: str, provider: str | None, when: float | None = None, **ctx: str) -> float:
    at = datetime.fromtimestamp(when, UTC) if when else datetime.now(UTC)
    calc = calc_price(usage, model, provider_id=provider, genai_request_timestamp=at, price_context=ctx or None)
    return float(calc.total_price)


# -- tiers, cache TTLs, long context, generic hosts, unknown models -------------------------------


@pytest.mark.parametrize(
    ("asked", "served"),
    [("flex", "flex"), ("priority", "priority"), (None, "default"), ("flex", "default"), ("priority", "flex")],
)
def test_served_tier_is_priced(cost: Sidecar, asked: str | None, served: str) -> None:
    """The tier the response reports is what is billed: requested ≠ served → served wins."""
    sid = session_id()
    kw: dict[str, Any] = {"service_tier": asked} if asked else {}
    resp = oai(cost, sid).chat.completions.create(
        model="gpt-5",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-mock-served-tier": served},
        **kw,
    )
    assert resp.service_tier == served and resp.usage is not None
    row = cost.row(sid)
    assert (row["service_tier"], row["request_service_tier"]) == (served, asked or "")
    u = Usage(input_tokens=resp.usage.prompt_tokens, output_tokens=resp.usage.completion_tokens)
    assert row["cost_usd"] == pytest.approx(price(u, "gpt-5", "openai", service_tier=served))
    assert row["cost_source"] == "genai-prices" and row["price_version"]
    if served != "default":  # the tier changes the price (else this test proves nothing)
        assert row["cost_usd"] != pytest.approx(price(u, "gpt-5", "openai"))


def test_one_hour_and_five_minute_cache_writes(cost: Sidecar) -> None:
    sid = session_id()
    usage = {
        "input_tokens": 100,
        "cache_read_input_tokens": 500,
        "cache_creation_input_tokens": 3000,
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
    }
    resp = ant(cost, sid, **{"x-mock-usage": json.dumps(usage)}).messages.create(
        model="claude-sonnet-4-5", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )
    row = cost.row(sid)
    assert (row["cache_write_tokens"], row["cache_write_1h_tokens"], row["cache_read_tokens"]) == (3000, 2000, 500)
    u = Usage(
        input_tokens=100 + 500 + 3000,
        cache_read_tokens=500,
        cache_write_tokens=3000,
        cache_write_1h_tokens=2000,
        output_tokens=resp.usage.output_tokens,
    )
    assert row["cost_usd"] == pytest.approx(price(u, "claude-sonnet-4-5", "anthropic"))
    all_5m = Usage(input_tokens=3600, cache_read_tokens=500, cache_write_tokens=3000, output_tokens=u.output_tokens)
    assert row["cost_usd"] > price(all_5m, "claude-sonnet-4-5", "anthropic")  # 1h writes cost more


def test_long_context_call_at_the_tier_price(cost: Sidecar) -> None:
    sid = session_id()
    mock_usage = json.dumps(
        {"input_tokens": 250_000, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "cache_creation": {}}
    )
    resp = ant(cost, sid, **{"x-mock-usage": mock_usage}).messages.create(
        model="claude-sonnet-4-5", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )
    row = cost.row(sid)
    u = Usage(input_tokens=250_000, output_tokens=resp.usage.output_tokens)
    expected = price(u, "claude-sonnet-4-5", "anthropic")
    assert row["input_tokens"] == 250_000 and row["cost_usd"] == pytest.approx(expected)
    base = price(Usage(input_tokens=1, output_tokens=0), "claude-sonnet-4-5", "anthropic") * 250_000
    assert row["input_cost_usd"] > base * 1.5  # the > 200k tier, not the base price


def test_gpt4o_on_a_generic_host_priced_by_model(cost: Sidecar) -> None:
    sid = session_id()
    resp = oai(cost, sid, base_url=f"https://{GATEWAY}/v1").chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    )
    assert resp.model == "gpt-4o-2024-08-06" and resp.usage is not None
    row = cost.row(sid)
    assert (row["provider"], row["server_address"], row["cost_source"]) == (
        "openai_compatible",
        GATEWAY,
        "genai-prices:model",
    )
    u = Usage(input_tokens=resp.usage.prompt_tokens, output_tokens=resp.usage.completion_tokens)
    assert row["cost_usd"] == pytest.approx(price(u, "gpt-4o-2024-08-06", None))


def test_unknown_model_is_unpriced(cost: Sidecar) -> None:
    sid = session_id()
    oai(cost, sid).chat.completions.create(model="acme-unreleased-7", messages=[{"role": "user", "content": "hi"}])
    row = cost.row(sid)
    assert row["input_tokens"] > 0
    assert (row["cost_usd"], row["cost_source"], row["price_version"]) == (None, "", "")


# -- billed but never completed ---------------------------------------------------------------------


def test_anthropic_stream_cut_after_message_start_is_partial(cost: Sidecar) -> None:
    sid = session_id()
    client = ant(cost, sid, **{"x-mock-scenario": "cut_after_start"})
    with (
        pytest.raises((anthropic.APIError, httpx2.HTTPError)),  # the dropped connection
        client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        ) as s,
    ):
        for _ in s:
            pass
    row = cost.row(sid, timeout=10)
    assert row["outcome"] != "ok" and row["usage_source"] == "partial"
    assert row["input_tokens"] == 28 + 1200 + 3400 and row["output_tokens"] > 0  # message_start's input; output as seen
    assert row["cost_usd"] is not None and row["cost_usd"] > 0


def test_cancelled_openai_stream_without_usage_is_estimated(cost: Sidecar) -> None:
    sid = session_id()
    stream = oai(cost, sid).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "tell me a long story about a lighthouse keeper"}],
        stream=True,
        extra_headers={"x-mock-delay-ms": "300", "x-mock-events": "40"},
    )
    for seen, _ in enumerate(stream, 1):
        if seen == 3:
            break
    stream.close()
    row = cost.row(sid, timeout=15)
    assert row["outcome"] == "cancelled" and row["usage_source"] == "estimated"
    assert row["input_tokens"] > 0 and row["output_tokens"] > 0
    assert row["cost_usd"] is not None and row["cost_usd"] > 0


# -- retries ----------------------------------------------------------------------------------------


def test_two_quota_429s_then_a_success_are_attempts_1_2_3(cost: Sidecar) -> None:
    """The SDK retries the same request itself (max_retries=2): the mock answers 429 twice."""
    sid = session_id()
    oai(cost, sid, retries=2).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "retry me"}],
        extra_headers={"x-mock-fail-first": "2", "x-mock-fail-key": sid, "x-mock-fail-with": "quota_429"},
    )
    rows = cost.rows(f"session_id = '{sid}'", 3, timeout=10)
    assert [(r["attempt"], r["status_code"]) for r in rows] == [(1, 429), (2, 429), (3, 200)]
    assert len({r["request_hash"] for r in rows}) == 1
    assert rows[0]["error_type"] == rows[1]["error_type"] != ""


# -- prompt-cache misses ----------------------------------------------------------------------------

TOOLS = [
    {"name": f"tool_{i}", "description": "does a thing " * 20, "input_schema": {"type": "object"}} for i in range(4)
]
SYSTEM = "You are a careful assistant. " * 60


def _body(tools: list[Any], system: str, turns: list[str]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for i, t in enumerate(turns):
        if i:
            messages.append({"role": "assistant", "content": f"answer {i}"})
        messages.append({"role": "user", "content": [{"type": "text", "text": t}]})
    messages[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}  # the marker moves to the newest turn
    sys_block = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
    return {"tools": tools, "system": sys_block, "messages": messages}


def test_session_of_six_calls_names_each_cache_miss(cost: Sidecar) -> None:
    """first call, hit, tools changed, system changed, pause (TTL), earlier message edited.

    The pause is real but short: the mock's prompt cache and the sidecar both stand a
    ``TTL_S``-second TTL for Anthropic's 5 minutes (``x-mock-cache-ttl`` and the test-only
    ``LLMTAP_TEST_CACHE_TTL`` read at the composition root), and the test sleeps past it.
    """
    sid = session_id()
    client = ant(cost, sid, **{"x-mock-scenario": "prompt_cache", "x-mock-cache-ttl": f"{TTL_S:g}"})
    turns = ["first question " * 30, "second question", "third", "fourth", "fifth"]
    tools2 = [*TOOLS, {"name": "tool_new", "description": "new", "input_schema": {"type": "object"}}]
    system2 = SYSTEM + "Be brief."
    plan = [
        ("first_call", _body(TOOLS, SYSTEM, turns[:1])),
        ("", _body(TOOLS, SYSTEM, turns[:2])),
        ("tools_changed", _body(tools2, SYSTEM, turns[:3])),
        ("system_changed", _body(tools2, system2, turns[:4])),
        ("ttl_expired", _body(tools2, system2, turns[:5])),
        ("history_changed", _body(tools2, system2, ["edited first question " * 30, *turns[1:5]])),
    ]
    usages: list[Any] = []
    for i, (_, body) in enumerate(plan):
        if i == 4:
            time.sleep(TTL_S + 1.0)
        resp = client.messages.create(model="claude-sonnet-4-5", max_tokens=50, **body)
        usages.append(resp.usage)
    rows = cost.rows(f"session_id = '{sid}'", 6, timeout=10)
    assert [r["cache_miss_reason"] for r in rows] == [reason for reason, _ in plan]

    def saving(total: int, tokens: int) -> float:  # tokens x (input price - cache-read price), genai-prices
        full = price(Usage(input_tokens=total), "claude-sonnet-4-5", "anthropic")
        read = price(Usage(input_tokens=total, cache_read_tokens=tokens), "claude-sonnet-4-5", "anthropic")
        return full - read

    for i, (row, u) in enumerate(zip(rows, usages, strict=True)):
        total = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
        if i == 0:  # the session's first call: a cold start, not a miss — cost 0 (DESIGN.md, third round)
            lost = 0
        else:
            p = usages[i - 1]
            lost = min(p.cache_read_input_tokens + p.cache_creation_input_tokens, total) - u.cache_read_input_tokens
        assert row["cache_miss_cost_usd"] is not None, row
        assert row["cache_miss_cost_usd"] == pytest.approx(saving(total, max(lost, 0)) if lost > 0 else 0.0)
        assert (row["cache_miss_cost_usd"] > 0) == (row["cache_miss_reason"] not in ("", "first_call"))


# -- batches ----------------------------------------------------------------------------------------


def test_openai_batch_results_download_is_one_row_per_item_at_batch_price(cost: Sidecar, tmp_path: Path) -> None:
    sid = session_id()
    client = oai(cost, sid)
    lines = [
        {
            "custom_id": f"req-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"q{i}"}]},
        }
        for i in range(3)
    ]
    f = tmp_path / "batch.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    up = client.files.create(file=f.open("rb"), purpose="batch")
    batch = client.batches.create(input_file_id=up.id, endpoint="/v1/chat/completions", completion_window="24h")
    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id
    out = client.files.content(done.output_file_id).text
    results = [json.loads(x) for x in out.splitlines() if x.strip()]
    items = cost.rows(f"session_id = '{sid}' AND billing = 'batch'", 3, timeout=10)
    assert len(items) == 3
    by_req = {r["request_id"]: r for r in items}
    for res in results:
        row, body = by_req[res["response"]["request_id"]], res["response"]["body"]
        u = Usage(input_tokens=body["usage"]["prompt_tokens"], output_tokens=body["usage"]["completion_tokens"])
        assert (row["batch_id"], row["api"], row["response_model"]) == (
            batch.id,
            "openai.chat_completions",
            body["model"],
        )
        at = body["created"]  # an item is priced when it was made (the prices in force then)
        assert row["cost_usd"] == pytest.approx(price(u, body["model"], "openai", at, processing="batch"))
        assert row["cost_usd"] < price(u, body["model"], "openai", at)
    control = cost.sql(
        f"SELECT api, cost_usd, batch_id FROM llm_calls WHERE session_id = '{sid}' AND billing != 'batch'"
    )
    assert control and all(c["cost_usd"] is None for c in control)  # create, poll, download: not priced


def test_anthropic_batch_results_are_one_row_per_item_at_batch_price(cost: Sidecar) -> None:
    sid = session_id()
    client = ant(cost, sid)
    reqs = [
        {
            "custom_id": f"a-{i}",
            "params": {
                "model": "claude-sonnet-4-5",
                "max_tokens": 50,
                "messages": [{"role": "user", "content": f"q{i}"}],
            },
        }
        for i in range(2)
    ]
    batch = client.messages.batches.create(requests=reqs)  # type: ignore[arg-type]
    assert client.messages.batches.retrieve(batch.id).processing_status == "ended"
    results = list(client.messages.batches.results(batch.id))
    assert len(results) == 2
    items = cost.rows(f"session_id = '{sid}' AND billing = 'batch'", 2, timeout=10)
    assert len(items) == 2
    for row, res in zip(items, results, strict=True):  # identical items: order does not matter
        assert res.result.type == "succeeded"
        msg = res.result.message
        mu = msg.usage
        cr, cw = mu.cache_read_input_tokens or 0, mu.cache_creation_input_tokens or 0
        u = Usage(
            input_tokens=mu.input_tokens + cr + cw,
            cache_read_tokens=cr,
            cache_write_tokens=cw,
            output_tokens=mu.output_tokens,
        )
        assert (row["batch_id"], row["api"], row["service_tier"]) == (batch.id, "anthropic.messages", "batch")
        assert row["cost_usd"] == pytest.approx(price(u, "claude-sonnet-4-5", "anthropic", processing="batch"))


def test_cost_metrics(cost: Sidecar) -> None:
    """llmtap_price_lookups_total{result}, llmtap_retry_attempts_total and llmtap_cache_miss_cost_usd_total
    after calls whose outcome is known."""
    from prometheus_client.parser import text_string_to_metric_families

    def value(name: str, **labels: str) -> float:
        _, body = cost.admin_request("GET", "/metrics")
        return sum(
            s.value
            for fam in text_string_to_metric_families(body.decode())
            for s in fam.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        )

    before = {r: value("llmtap_price_lookups_total", result=r) for r in ("hit", "model_only", "miss")}
    sid = session_id()
    oai(cost, sid).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a"}])
    oai(cost, sid, base_url=f"https://{GATEWAY}/v1").chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "b"}]
    )
    oai(cost, sid).chat.completions.create(model="acme-metrics-9", messages=[{"role": "user", "content": "c"}])
    oai(cost, sid, retries=1).chat.completions.create(
        model="gpt-metrics-retry",
        messages=[{"role": "user", "content": "d"}],
        extra_headers={"x-mock-fail-first": "1", "x-mock-fail-key": sid, "x-mock-fail-with": "quota_429"},
    )
    client = ant(cost, sid, **{"x-mock-scenario": "prompt_cache"})
    client.messages.create(model="claude-sonnet-4-5", max_tokens=5, **_body(TOOLS, SYSTEM + sid, ["q"]))
    tools2 = [*TOOLS, {"name": "tool_metrics", "description": "new", "input_schema": {"type": "object"}}]
    client.messages.create(model="claude-sonnet-4-5", max_tokens=5, **_body(tools2, SYSTEM + sid, ["q", "r"]))
    cost.rows(f"session_id = '{sid}'", 7, timeout=10)
    time.sleep(0.5)
    after = {r: value("llmtap_price_lookups_total", result=r) for r in ("hit", "model_only", "miss")}
    assert after["hit"] >= before["hit"] + 2 and after["model_only"] >= before["model_only"] + 1
    assert after["miss"] >= before["miss"] + 2  # the unknown model, and the retried one's success
    assert value("llmtap_retry_attempts_total", model="gpt-metrics-retry", error_type="quota_exhausted") == 1
    assert value("llmtap_cache_miss_cost_usd_total", reason="tools_changed") > 0
    assert value("llmtap_cache_miss_cost_usd_total", reason="first_call") == 0  # cold starts cost nothing
