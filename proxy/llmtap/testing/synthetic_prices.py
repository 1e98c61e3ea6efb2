"""The seeded history's prices: the pricer's, computed once per model (:class:`LinearPrices`) or once per usage and
day (:class:`DailyPrices`)."""

from __future__ import annotations

from ..providers import genai_prices_id, priced_by_model
from ..record import CallRecord
from ..telemetry.pricing import Pricer, Tokens


class LinearPrices:
    """The pricer's prices, computed once per model: the synthetic calls are far below any price tier, where
    a price is linear in each token count (tests/unit/test_synthetic.py checks it against the pricer)."""

    BASIS = 1000  # tokens per basis usage: under every tier threshold

    def __init__(self, pricer: Pricer) -> None:
        self.pricer = pricer
        self._rates: dict[tuple[str, str, str], tuple[float, float, float, float] | None] = {}
        self._tools: dict[tuple[str, str, str, str], float | None] = {}  # USD per use of a server tool

    def _price(self, r: CallRecord, **tokens: int) -> tuple[float, float] | None:
        probe = CallRecord(provider=r.provider, request_model=r.request_model, response_model=r.response_model)
        for k, v in tokens.items():
            setattr(probe, k, v)
        p = self.pricer.price(probe)
        return None if p is None else (p.input, p.output)

    def cache_read_saving(self, r: CallRecord, tokens: int) -> float | None:
        """What ``tokens`` would have cost less read from the cache (after :meth:`apply` saw the model)."""
        rates = self._rates.get((r.provider, r.request_model, r.response_model))
        return None if rates is None else tokens * (rates[0] - rates[1])

    def apply(self, r: CallRecord) -> None:
        if r.cost_usd is not None or r.usage_source == "none":
            return
        key = (r.provider, r.request_model, r.response_model)
        if key not in self._rates:
            b = self.BASIS
            plain, read, write, out = (
                self._price(r, input_tokens=b),
                self._price(r, input_tokens=b, cache_read_tokens=b),
                self._price(r, input_tokens=b, cache_write_tokens=b),
                self._price(r, output_tokens=b),
            )
            if plain is None or read is None or write is None or out is None:
                self._rates[key] = None
            else:
                self._rates[key] = (plain[0] / b, read[0] / b, write[0] / b, out[1] / b)
        rates = self._rates[key]
        if rates is None:
            return
        uncached = max(r.input_tokens - r.cache_read_tokens - r.cache_write_tokens, 0)
        r.input_cost_usd = uncached * rates[0] + r.cache_read_tokens * rates[1] + r.cache_write_tokens * rates[2]
        r.output_cost_usd = r.output_tokens * rates[3]
        r.uncached_input_cost_usd = r.text_rate_input_cost_usd = r.input_tokens * rates[0]
        r.text_rate_output_cost_usd = r.output_cost_usd
        r.tool_cost_usd = self._tool_cost(r)
        r.cost_usd = r.input_cost_usd + r.output_cost_usd + (r.tool_cost_usd or 0.0)
        r.cost_source = "genai-prices"

    def _tool_cost(self, r: CallRecord) -> float | None:
        usd = 0.0
        for kind, n in r.server_tool_calls.items():
            key = (r.provider, r.request_model, r.response_model, kind)
            if key not in self._tools:
                probe = CallRecord(
                    provider=r.provider, request_model=r.request_model, response_model=r.response_model,
                    server_tool_calls={kind: self.BASIS},
                )  # fmt: skip
                p = self.pricer.price(probe)
                self._tools[key] = None if p is None or p.tool is None else p.tool / self.BASIS
            each = self._tools[key]
            if each is None:
                return None
            usd += n * each
        return usd


_PRICED = (  # what Pricer.apply writes
    "cost_usd",
    "input_cost_usd",
    "output_cost_usd",
    "uncached_input_cost_usd",
    "tool_cost_usd",
    "unpriced_tools",
    "text_rate_input_cost_usd",
    "text_rate_output_cost_usd",
    "cost_source",
    "price_version",
)


class DailyPrices:
    """:meth:`Pricer.apply <llmtap.telemetry.pricing.Pricer.apply>` computed once per usage and UTC day: a
    planted scenario repeats a few usages thousands of times, and the pricer probes a model's prices once per
    hour. genai-prices changes a price on a start date (a UTC day) or at a time of day: a call of a model
    with a time-of-day price is priced on its own, every other one copies the pricer's answer for the same
    usage on the same day — the same values the pricer would give it (``on_lookup`` sees only the first)."""

    def __init__(self, pricer: Pricer) -> None:
        self.pricer = pricer
        self._done: dict[tuple[object, ...], tuple[object, ...]] = {}
        self._timed: dict[tuple[str, str, str], bool] = {}

    def apply(self, r: CallRecord) -> None:
        if r.cost_usd is not None or r.usage_source == "none" or r.timestamp <= 0 or self._time_of_day(r):
            self.pricer.apply(r)
            return
        key = (
            int(r.timestamp // 86400),
            r.provider,
            r.request_model,
            r.response_model,
            r.service_tier,
            r.billing,
            Tokens.of(r),
            tuple(sorted(r.server_tool_calls.items())),
        )
        done = self._done.get(key)
        if done is None:
            self.pricer.apply(r)
            self._done[key] = tuple(getattr(r, k) for k in _PRICED)
            return
        for k, v in zip(_PRICED, done, strict=True):
            setattr(r, k, v)

    def _time_of_day(self, r: CallRecord) -> bool:
        """Whether genai-prices has a time-of-day price for a model ``r`` names (at its provider)."""
        key = (r.provider, r.request_model, r.response_model)
        if key not in self._timed:
            self._timed[key] = any(_timed(r.provider, m) for m in {r.request_model, r.response_model} if m)
        return self._timed[key]


def _timed(provider: str, model: str) -> bool:
    from genai_prices.data_snapshot import get_snapshot
    from genai_prices.types import ModelPrice, TimeOfDateConstraint

    pid = None if priced_by_model(provider) else genai_prices_id(provider)
    try:
        info = get_snapshot().find_provider_model(model, None, pid, None)[1]
    except LookupError:
        return False  # not priced by genai-prices at this provider
    conditional = [] if isinstance(info.prices, ModelPrice) else info.prices
    constraints = [c.constraint for c in conditional] + [v.constraint for v in info.price_variants or ()]
    return any(isinstance(c, TimeOfDateConstraint) for c in constraints)
