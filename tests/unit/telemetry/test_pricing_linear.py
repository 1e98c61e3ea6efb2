"""The per-token fast path of genai-prices quotes (:class:`llmtap.telemetry.pricing.Linear`) gives what
``calc_price`` gives, to the last digit, for every model genai-prices knows — tiered ones included, which
must fall back to ``calc_price`` (a linear form would misprice a call past a tier's threshold)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from genai_prices.data import providers
from hypothesis import given, settings
from hypothesis import strategies as st

from llmtap.telemetry.pricing import GenaiQuote, Linear, Tokens

WHEN = datetime(2026, 11, 15, 12, tzinfo=UTC)
MODELS = [(p.id, m.id) for p in providers for m in p.models]
CONTEXTS = [{}, {"service_tier": "priority"}, {"service_tier": "flex"}, {"processing": "batch"}]


@st.composite
def usages(draw: st.DrawFn) -> Tokens:
    inp = draw(st.integers(0, 3_000_000))
    cr = draw(st.integers(0, inp))
    cw = draw(st.integers(0, inp - cr))
    return Tokens(inp, draw(st.integers(0, 200_000)), cr, cw, draw(st.integers(0, cw)))


def calc_price(q: GenaiQuote, t: Tokens) -> tuple[float, float]:
    inp, out = q.calc(t)
    return float(inp), float(out)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(CONTEXTS), usages())
def test_the_fast_path_prices_like_calc_price(model: tuple[str, str], context: dict[str, str], t: Tokens) -> None:
    q = GenaiQuote(model[0], model[1], context, WHEN)
    try:
        want = calc_price(q, t)
    except Exception:  # genai-prices refuses this usage for this model: so must the quote
        with pytest.raises(Exception):  # noqa: B017 - whatever genai-prices raises
            q(t)
        return
    assert q(t) == want


def test_tiered_and_per_request_prices_are_not_linear() -> None:
    tiered = [
        (p.id, m.id)
        for p in providers
        for m in p.models
        if not isinstance(m.prices, list) and "Tiered" in repr(m.prices)
    ]
    assert tiered, "genai-prices has long-context tiers (e.g. Gemini 2.5 Pro): the check needs one"
    for provider, model in tiered[:20]:
        q = GenaiQuote(provider, model, {}, WHEN)
        assert Linear.probe(q.calc) is None, (provider, model)
    linear = GenaiQuote("openai", "gpt-4o", {}, WHEN)
    assert Linear.probe(linear.calc) is not None
