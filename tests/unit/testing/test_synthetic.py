"""The synthetic history's shortcuts agree with what they stand for."""

from __future__ import annotations

import math
import random

import pytest

from llmtap.record import CallRecord
from llmtap.telemetry.pricing import Pricer
from llmtap.testing.synthetic import MODELS, LinearPrices, daily_weight, generate


def test_linear_prices_are_the_pricers_prices_for_synthetic_calls() -> None:
    pricer, linear = Pricer(), LinearPrices(Pricer())
    rnd = random.Random(3)
    checked = 0
    for provider, _, model, resp_model, *_ in MODELS:
        for _ in range(30):
            inp = int(rnd.lognormvariate(math.log(1200), 0.8) * 1.8)  # up to a planted regression's factor
            kw = dict(
                provider=provider,
                request_model=model,
                response_model=resp_model,
                input_tokens=inp,
                cache_read_tokens=int(inp * rnd.choice([0, 0.5, 0.8])),
                cache_write_tokens=int(inp * 0.1) if provider == "anthropic" and rnd.random() < 0.5 else 0,
                output_tokens=rnd.randint(0, 3000),
                usage_source="provider",
            )
            a, b = CallRecord(**kw), CallRecord(**kw)  # type: ignore[arg-type]
            pricer.apply(a)
            linear.apply(b)
            assert (a.cost_usd is None) == (b.cost_usd is None)
            if a.cost_usd is not None:
                assert b.cost_usd is not None and math.isclose(a.cost_usd, b.cost_usd, rel_tol=1e-9), (model, kw)
                assert math.isclose(a.input_cost_usd or 0, b.input_cost_usd or 0, rel_tol=1e-9, abs_tol=1e-15)
                assert math.isclose(a.uncached_input_cost_usd or 0, b.uncached_input_cost_usd or 0, rel_tol=1e-9)
                assert a.cost_source == b.cost_source
                checked += 1
    assert checked >= 150


@pytest.mark.slow  # weeks of synthetic history: with the e2e suite, off the fast unit loop
@pytest.mark.e2e
def test_daily_weight_is_the_cycle_the_history_follows() -> None:
    day = 86400 * 20000
    weights = [daily_weight(day + h * 3600 + 1800) for h in range(24)]
    assert math.isclose(sum(weights) / 24, 1.0, rel_tol=0.02)  # relative to the day's mean
    calls = list(generate(40000, day, day + 86400, seed=5))
    per_hour = [0] * 24
    for r in calls:
        per_hour[int((r.timestamp - day) // 3600)] += 1
    for h in (3, 12, 15):  # a night hour, midday and the afternoon peak
        assert math.isclose(per_hour[h] / (len(calls) / 24), weights[h], rel_tol=0.15), (h, per_hour[h], weights[h])
