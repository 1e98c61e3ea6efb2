"""Cost: genai-prices (a maintained price source) first, a user price file on top.

``cost_usd`` stays ``None`` (NULL) when no price is known, never 0. A cost the
provider reported itself (OpenRouter ``usage.cost``) is kept as is.

Every pricing dimension the record knows is passed on (genai-prices ``price_context`` and usage):
the tier that *served* the call (``service_tier``: the response's, else the requested one, so
``flex`` is about half price and ``priority`` about double), batch processing (``billing = batch``
or a ``batch`` tier: ``processing = batch``), the 5-minute / 1-hour split of cache writes
(``cache_write_tokens`` with its ``cache_write_1h_tokens`` subset) and the total input, which
picks a long-context tier (e.g. over 200k input tokens every token is billed at the tier price).
A provider llmtap does not know (an OpenAI-compatible gateway, ``openai_compatible``) and a plan
reselling other providers' models (Copilot) are priced by the model name alone:
``cost_source = genai-prices:model``. ``price_version`` is the genai-prices package version
(its bundled price data), or the price file's content hash.

Audio and image tokens are priced at their own rates (genai-prices' ``input_audio_tokens``,
``output_audio_tokens``, ``cache_audio_read_tokens``, ``input_image_tokens``, ``output_image_tokens``), and
server-side tool uses (``server_tool_calls``) by genai-prices' units where it has one (``web_searches``,
``storage_searches``, ``code_executions``), else by the price file (:mod:`.price_file`): ``tool_cost_usd``,
part of ``cost_usd``. A tool kind no price covers leaves the token cost as it is and is named on the span
(``llmtap.unpriced_tools``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ..providers import genai_prices_id, priced_by_model, self_hosted
from ..record import CallRecord, CostSource
from .price_file import PriceFileError, PriceRule, load_price_file
from .quotes import MAX_REMEMBERED, TOOL_UNITS, GenaiQuote, Linear, Quote, RuleQuote, Tokens

__all__ = [
    "TOOL_UNITS",
    "GenaiQuote",
    "Linear",
    "Price",
    "PriceFileError",
    "PriceRule",
    "Pricer",
    "Tokens",
    "load_price_file",
]

log = logging.getLogger("llmtap.pricing")


LookupResult = Literal["hit", "model_only", "miss"]
"""``llmtap_price_lookups_total{result}``: priced with the provider's price (or a price file), priced
by the model name alone, or not priced."""


@dataclass(frozen=True, slots=True)
class Price:
    total: float
    input: float
    output: float
    source: CostSource
    uncached_input: float  # the input at the uncached input price, every token (no cache read or write)
    version: str = ""
    tool: float | None = 0.0  # server tool uses (part of total); None: some were used, none could be priced
    unpriced_tools: tuple[str, ...] = ()  # kinds used that no price covers
    text_input: float = 0.0  # the input with no cache, every token at the text rate
    text_output: float = 0.0  # the output, every token at the text rate


def price_context(r: CallRecord) -> dict[str, str]:
    """genai-prices' request context: batch processing, else the served tier.

    A batch item's body still names a tier (OpenAI's say ``default``), but a batch is billed at the
    batch price alone: genai-prices resolves each price from the first matching variant, and a
    ``service_tier = default`` variant would hide the batch one."""
    tier = r.service_tier.lower()
    if r.billing == "batch" or tier == "batch":
        return {"processing": "batch"}
    return {"service_tier": tier} if tier else {}


class Pricer:
    """The pricing :class:`~llmtap.pipeline.Enricher`. ``on_lookup`` counts each lookup's result
    (``llmtap_price_lookups_total``) without this module depending on the metrics."""

    def __init__(
        self, rules: list[PriceRule] | None = None, on_lookup: Callable[[LookupResult], None] | None = None
    ) -> None:
        self.rules = rules or []
        self.on_lookup = on_lookup
        self._unknown: set[tuple[str | None, str]] = set()
        self._known: set[tuple[str | None, str]] = set()
        self._lock = threading.Lock()

    def quote(self, r: CallRecord) -> Quote | None:
        """The price sheet for ``r``'s model, provider and tier; ``None``: no price is known."""
        models = [m for m in (r.response_model, r.request_model) if m]
        for model in models:
            for rule in self.rules:
                if not rule.tools_only and rule.matches(r.provider, model, r.service_tier):
                    return RuleQuote(rule)
        if self_hosted(r.provider):  # a server of one's own: price files only
            return None
        provider_id = None if priced_by_model(r.provider) else genai_prices_id(r.provider)
        when = datetime.fromtimestamp(r.timestamp, UTC) if r.timestamp > 0 else datetime.now(UTC)
        context = price_context(r)
        for model in models:
            key = (provider_id, model)
            q = GenaiQuote(provider_id, model, context, when)
            with self._lock:
                if key in self._unknown:
                    continue
                if key in self._known:
                    return q
            try:
                q(Tokens(1))
                with self._lock:
                    self._remember(self._known, key)
                return q
            except LookupError:
                pass
            except Exception as e:  # a price source bug must not lose the record
                log.warning("genai-prices failed for %s/%s: %s", provider_id, model, e)
                continue
            with self._lock:
                self._remember(self._unknown, key)
        return None

    @staticmethod
    def _remember(seen: set[tuple[str | None, str]], key: tuple[str | None, str]) -> None:
        if len(seen) >= MAX_REMEMBERED:  # bounded: arbitrary model names must not grow it without end
            seen.clear()
        seen.add(key)

    def price(self, r: CallRecord) -> Price | None:
        q = self.quote(r)
        if q is None:
            return None
        t = Tokens.of(r)
        try:
            inp, out = q(t)
            uncached = inp
            if t.cache_read or t.cache_write:  # the same input, priced as if no cache were in use
                uncached = q(Tokens(t.input, input_audio=t.input_audio, input_image=t.input_image))[0]
            text_in = q(Tokens(t.input))[0] if t.input_audio or t.input_image else uncached
            text_out = q(Tokens(0, t.output))[1] if t.output_audio or t.output_image else out
            tool, unpriced = self._tools(r, q)
            fee = q.request_fee()  # a fee per request pays for a tool the provider runs on every call
            if fee:
                tool = (tool or 0.0) + fee
        except Exception as e:  # inconsistent usage (a subset larger than its total), a price source bug
            log.warning("pricing %s/%s failed: %s", r.provider, r.response_model or r.request_model, e)
            return None
        total = inp + out + (tool or 0.0)
        return Price(total, inp, out, q.source, uncached, q.version, tool, unpriced, text_in, text_out)

    def _tools(self, r: CallRecord, q: Quote) -> tuple[float | None, tuple[str, ...]]:
        """``(USD, kinds unpriced)`` of ``r``'s server tool uses: the price file's per-use price for a kind
        first (a rule for the call's model that names it), else the quote's own (genai-prices' unit)."""
        if not r.server_tool_calls:
            return 0.0, ()
        usd, priced, unpriced = 0.0, False, []
        for kind, n in sorted(r.server_tool_calls.items()):
            each = self._tool_rule(r, kind)
            if each is None:
                each = q.tool_price(kind)
            if each is None:
                unpriced.append(kind)
            else:
                usd, priced = usd + n * each, True
        return (usd if priced or not unpriced else None), tuple(unpriced)

    def _tool_rule(self, r: CallRecord, kind: str) -> float | None:
        for model in (m for m in (r.response_model, r.request_model) if m):
            for rule in self.rules:
                each = rule.tool_price(kind)
                if each is not None and rule.matches(r.provider, model, r.service_tier):
                    return each
        return None

    def cache_read_saving(self, r: CallRecord, tokens: int) -> float | None:
        """What ``tokens`` of ``r``'s input would have cost less read from the cache than sent
        uncached: ``tokens * (input price - cache-read price)`` at ``r``'s model, tier and context
        length. ``None``: no price is known."""
        q = self.quote(r)
        if q is None:
            return None
        total = max(r.input_tokens, tokens)
        try:
            return max(q(Tokens(total))[0] - q(Tokens(total, cache_read=tokens))[0], 0.0)
        except Exception:
            return None

    def warm(self) -> None:
        """Load the price data now (at start) rather than on the first call, which would carry its cost."""
        try:
            GenaiQuote("openai", "gpt-4o", {}, datetime.now(UTC))(Tokens(1))
        except Exception as e:
            log.warning("genai-prices could not be loaded: %s", e)

    def enrich(self, r: CallRecord, ctx: object = None) -> None:
        """The :class:`~llmtap.pipeline.Enricher` face of :meth:`apply`."""
        self.apply(r)

    def apply(self, r: CallRecord) -> None:
        if r.cost_usd is not None or r.usage_source == "none":
            return
        p = self.price(r)
        if p is not None:
            r.cost_usd, r.input_cost_usd, r.output_cost_usd = p.total, p.input, p.output
            r.uncached_input_cost_usd = p.uncached_input
            r.tool_cost_usd, r.unpriced_tools = p.tool, ",".join(p.unpriced_tools)
            r.text_rate_input_cost_usd, r.text_rate_output_cost_usd = p.text_input, p.text_output
            r.cost_source, r.price_version = p.source, p.version
        if self.on_lookup is not None:
            result: LookupResult = "miss" if p is None else "model_only" if p.source == "genai-prices:model" else "hit"
            self.on_lookup(result)
