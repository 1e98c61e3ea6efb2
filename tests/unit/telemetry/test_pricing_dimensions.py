"""Every pricing dimension reaches genai-prices: served tier, batch, 1h cache writes, long context,
model-only lookups, price-file tiers, price_version and the lookup counter. Expected values are
genai-prices' own for the same usage and context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import genai_prices
import pytest
from genai_prices import Usage, calc_price

from llmtap.record import CallRecord
from llmtap.telemetry.pricing import Pricer, load_price_file


def rec(**kw: Any) -> CallRecord:
    base: dict[str, Any] = {
        "provider": "openai",
        "request_model": "gpt-5",
        "input_tokens": 10_000,
        "output_tokens": 2_000,
        "usage_source": "provider",
    }
    base.update(kw)
    return CallRecord(**base)


def gp(usage: Usage, model: str, provider: str | None, **ctx: str) -> float:
    return float(calc_price(usage, model, provider_id=provider, price_context=ctx or None).total_price)


U = Usage(input_tokens=10_000, output_tokens=2_000)


@pytest.mark.parametrize("served", ["flex", "priority", "default"])
def test_the_served_tier_is_priced_not_the_requested_one(served: str) -> None:
    r = rec(service_tier=served, request_service_tier="priority" if served != "priority" else "flex")
    Pricer().apply(r)
    assert r.cost_usd == pytest.approx(gp(U, "gpt-5", "openai", service_tier=served))


def test_flex_and_priority_differ_from_default() -> None:
    costs = {}
    for tier in ("flex", "default", "priority"):
        r = rec(service_tier=tier)
        Pricer().apply(r)
        costs[tier] = r.cost_usd
    assert costs["flex"] < costs["default"] < costs["priority"]


def test_a_batch_item_is_priced_at_the_batch_price_whatever_tier_its_body_names() -> None:
    r = rec(request_model="gpt-4o-mini", billing="batch", service_tier="default")
    Pricer().apply(r)
    assert r.cost_usd == pytest.approx(gp(U, "gpt-4o-mini", "openai", processing="batch"))
    assert r.cost_usd < gp(U, "gpt-4o-mini", "openai")


def test_one_hour_cache_writes_are_priced_apart() -> None:
    r = rec(
        provider="anthropic",
        request_model="claude-sonnet-4-5",
        input_tokens=5000,
        cache_write_tokens=3000,
        cache_write_1h_tokens=2000,
        cache_read_tokens=1000,
    )
    Pricer().apply(r)
    want = Usage(
        input_tokens=5000,
        cache_write_tokens=3000,
        cache_write_1h_tokens=2000,
        cache_read_tokens=1000,
        output_tokens=2000,
    )
    assert r.cost_usd == pytest.approx(gp(want, "claude-sonnet-4-5", "anthropic"))
    five_min = Usage(input_tokens=5000, cache_write_tokens=3000, cache_read_tokens=1000, output_tokens=2000)
    assert r.cost_usd > gp(five_min, "claude-sonnet-4-5", "anthropic")


def test_long_context_tier_from_the_total_input() -> None:
    r = rec(provider="anthropic", request_model="claude-sonnet-4-5", input_tokens=250_000, output_tokens=100)
    Pricer().apply(r)
    assert r.cost_usd == pytest.approx(
        gp(Usage(input_tokens=250_000, output_tokens=100), "claude-sonnet-4-5", "anthropic")
    )
    small = rec(provider="anthropic", request_model="claude-sonnet-4-5", input_tokens=100_000, output_tokens=100)
    Pricer().apply(small)
    assert r.input_cost_usd is not None and small.input_cost_usd is not None
    assert r.input_cost_usd / 250_000 > small.input_cost_usd / 100_000 * 1.5  # every token at the tier price


@pytest.mark.parametrize("provider", ["openai_compatible", "some_gateway_llmtap_does_not_know", "github_copilot"])
def test_gateways_and_unknown_providers_are_priced_by_model(provider: str) -> None:
    r = rec(provider=provider, request_model="gpt-4o", response_model="gpt-4o-2024-08-06")
    Pricer().apply(r)
    assert r.cost_source == "genai-prices:model"
    assert r.cost_usd == pytest.approx(gp(U, "gpt-4o-2024-08-06", None))


def test_unknown_model_null_and_lookups_counted() -> None:
    seen: list[str] = []
    pricer = Pricer(on_lookup=seen.append)
    calls = [rec(), rec(provider="openai_compatible", request_model="gpt-4o"), rec(request_model="acme-9000")]
    for r in calls:
        pricer.apply(r)
    assert seen == ["hit", "model_only", "miss"]
    assert (calls[2].cost_usd, calls[2].cost_source, calls[2].price_version) == (None, "", "")
    assert calls[0].price_version == genai_prices.__version__


def test_price_file_tier_rules_and_one_hour_writes(tmp_path: Path) -> None:
    f = tmp_path / "prices.toml"
    f.write_text(
        """
[[price]]
model = "house-*"
service_tier = "flex"
input_mtok = 1.0
output_mtok = 2.0

[[price]]
model = "house-*"
input_mtok = 2.0
output_mtok = 4.0
cache_write_mtok = 2.5
cache_write_1h_mtok = 4.0
"""
    )
    rules = load_price_file(f)
    pricer = Pricer(rules)
    flex = rec(provider="vllm", request_model="house-1", service_tier="flex")
    std = rec(provider="vllm", request_model="house-1", cache_write_tokens=1000, cache_write_1h_tokens=400)
    pricer.apply(flex)
    pricer.apply(std)
    assert flex.cost_usd == pytest.approx((10_000 * 1.0 + 2_000 * 2.0) / 1e6)
    assert std.cost_usd == pytest.approx((9_000 * 2.0 + 600 * 2.5 + 400 * 4.0 + 2_000 * 4.0) / 1e6)
    assert flex.cost_source == std.cost_source == "price_file"
    assert flex.price_version == rules[0].version and len(rules[0].version) == 12


def test_lookup_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmtap.telemetry import pricing

    monkeypatch.setattr(pricing, "MAX_REMEMBERED", 20)
    p = Pricer()
    for i in range(200):
        p.apply(rec(request_model=f"unknown-model-{i}"))
    assert len(p._unknown) <= 20
