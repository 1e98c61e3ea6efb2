"""The seeded history's prices: the pricer's, computed once per model (:class:`LinearPrices`)."""

from __future__ import annotations

from ..record import CallRecord
from ..telemetry.pricing import Pricer


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
