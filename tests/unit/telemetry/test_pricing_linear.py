"""The per-token fast path of genai-prices quotes (:class:`llmtap.telemetry.pricing.Linear`) gives what
``calc_price`` gives, to the last digit, for every model genai-prices knows — tiered ones included, which
must fall back to ``calc_price`` (a linear form would misprice a call past a tier's threshold). Usages carry
audio and image subsets and tool units: each modality at its own rate, each tool use at its unit price, as
``calc_price`` prices them."""

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
    out = draw(st.integers(0, 200_000))
    modal = draw(st.booleans())
    acr = draw(st.integers(0, cr)) if modal else 0  # audio read from the cache
    ain = draw(st.integers(0, inp - cr - cw)) if modal else 0  # audio sent uncached
    img = draw(st.integers(0, inp - cr - cw - ain)) if modal else 0
    aout = draw(st.integers(0, out)) if modal else 0
    iout = draw(st.integers(0, out - aout)) if modal else 0
    units = tuple((u, draw(st.integers(0, 5))) for u in ("web_searches", "storage_searches")) if modal else ()
    return Tokens(inp, out, cr, cw, draw(st.integers(0, cw)), ain + acr, img, acr, aout, iout, units)


def calc_price(q: GenaiQuote, t: Tokens) -> tuple[float, float]:
    inp, out, _, _ = q.calc(t)
    return float(inp), float(out)


def tool_fees(q: GenaiQuote, t: Tokens) -> float:
    """What ``calc_price`` bills beyond input and output for ``t``: its tool units and a fee per request."""
    return float(q.calc(t)[2])


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
    kinds = {"web_searches": "web_search", "storage_searches": "file_search"}
    fees = q.request_fee()  # Perplexity's Sonar bills each request ($12 per 1000 in genai-prices)
    for unit, n in t.units:
        each = q.tool_price(kinds[unit])
        fees += n * each if each is not None else 0.0
    assert fees == pytest.approx(tool_fees(q, t), rel=1e-9, abs=1e-15)


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


def test_a_time_of_day_price_applies_from_its_minute_not_its_hour() -> None:
    """DeepSeek's off-peak prices start at 16:30 UTC: calls every quarter hour of a day, in order (the fast path
    probed once per hour, at its first call, gave 16:45 the 16:00 price), each priced as calc_price prices it at
    its own time — for every model genai-prices gives a time-of-day price."""
    from genai_prices.types import TimeOfDateConstraint

    timed = [
        (p.id, m.id)
        for p in providers
        for m in p.models
        if isinstance(m.prices, list) and any(isinstance(c.constraint, TimeOfDateConstraint) for c in m.prices)
    ]
    assert ("deepseek", "deepseek-chat") in timed
    t = Tokens(12_000, 3_000, 4_000)
    day = datetime(2026, 12, 2, tzinfo=UTC).timestamp()
    for provider, model in timed:
        for quarter in range(96):
            q = GenaiQuote(provider, model, {}, datetime.fromtimestamp(day + 900 * quarter, UTC))
            assert q(t) == tuple(float(x) for x in q.calc(t)[:2]), (model, quarter // 4, quarter % 4 * 15)
