"""Cost: genai-prices, price files, provider-reported cost, unknown models."""

from __future__ import annotations

from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from llmtap.record import CallRecord
from llmtap.telemetry.pricing import PriceFileError, Pricer, PriceRule, load_price_file


def rec(**kw: object) -> CallRecord:
    base: dict[str, object] = {
        "provider": "openai",
        "request_model": "gpt-4o",
        "input_tokens": 1000,
        "output_tokens": 500,
        "cache_read_tokens": 400,
        "reasoning_tokens": 100,
        "usage_source": "provider",
    }
    base.update(kw)
    return CallRecord(**base)  # type: ignore[arg-type]


def test_genai_prices_with_dated_models_and_cache() -> None:
    r = rec(response_model="gpt-4o-2024-08-06")
    Pricer().apply(r)
    want = calc_price(
        Usage(input_tokens=1000, cache_read_tokens=400, output_tokens=500), "gpt-4o-2024-08-06", provider_id="openai"
    )
    assert r.cost_usd == pytest.approx(float(want.total_price)) and r.cost_source == "genai-prices"
    # what the same 1000 input tokens cost with no cache: every token at the input price (gpt-4o: $2.50/Mtok)
    assert r.uncached_input_cost_usd == pytest.approx(1000 * 2.5 / 1e6)
    assert r.input_cost_usd is not None and r.input_cost_usd < r.uncached_input_cost_usd


def test_unknown_model_and_self_hosted_stay_null() -> None:
    for r in (rec(request_model="acme-9000"), rec(provider="vllm", request_model="gpt-4o"), rec(usage_source="none")):
        Pricer().apply(r)
        assert r.cost_usd is None and r.input_cost_usd is None


def test_provider_reported_cost_wins() -> None:
    r = rec(provider="openrouter", cost_usd=0.95)
    Pricer([PriceRule(model="*", input_mtok=1e6, output_mtok=1e6)]).apply(r)
    assert r.cost_usd == 0.95


def test_price_rules_glob_and_provider(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text(
        '{"price": [{"provider": "vllm", "model": "llama-*", "input_mtok": 1, "output_mtok": 2,'
        ' "cache_read_mtok": 0.5}]}'
    )
    pricer = Pricer(load_price_file(f))
    r = rec(provider="vllm", request_model="llama-3.1-70b")
    pricer.apply(r)
    assert r.input_cost_usd == pytest.approx((600 * 1 + 400 * 0.5) / 1e6)
    assert r.output_cost_usd == pytest.approx(500 * 2 / 1e6) and r.cost_source == "price_file"
    other = rec(provider="ollama", request_model="llama-3")
    pricer.apply(other)
    assert other.cost_usd is None


@pytest.mark.parametrize("text", ['{"price": [{"model": "x"}]}', "not json", '{"price": 3}'])
def test_bad_price_files_are_clear_errors(tmp_path: Path, text: str) -> None:
    f = tmp_path / "p.json"
    f.write_text(text)
    with pytest.raises(PriceFileError, match=str(f)):
        load_price_file(f)
