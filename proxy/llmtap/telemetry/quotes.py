"""Price sheets: one call's usage (:class:`Tokens`) priced by a price-file rule (:class:`RuleQuote`) or by
genai-prices (:class:`GenaiQuote`, with its per-token fast path :class:`Linear`, checked against
``calc_price``). :mod:`.pricing` picks the sheet for a call."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from ..record import CallRecord, CostSource
from .price_file import PriceRule

MAX_REMEMBERED = 10_000  # (provider, model) lookups remembered, known or unknown (model names come from requests)

# Server tool kinds (record.ServerTool) → the genai-prices usage unit that bills them. Gemini grounding is
# billed per grounded prompt, which genai-prices prices as ``web_searches``.
TOOL_UNITS: dict[str, str] = {
    "web_search": "web_searches",
    "grounding": "web_searches",
    "file_search": "storage_searches",
    "code_execution": "code_executions",
}


@dataclass(frozen=True, slots=True)
class Tokens:
    """A usage to price, in the contract's terms (``input`` includes cache reads and writes; each modality
    field is a subset of its total, ``cache_read_audio`` of both ``cache_read`` and ``input_audio``)."""

    input: int
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0  # subset of cache_write
    input_audio: int = 0
    input_image: int = 0
    cache_read_audio: int = 0
    output_audio: int = 0
    output_image: int = 0
    units: tuple[tuple[str, int], ...] = ()  # genai-prices tool units (``web_searches``, …): calc_price only

    @classmethod
    def of(cls, r: CallRecord) -> Tokens:
        cw = r.cache_write_tokens
        return cls(
            r.input_tokens,
            r.output_tokens,
            r.cache_read_tokens,
            cw,
            min(r.cache_write_1h_tokens, cw),
            r.input_audio_tokens,
            r.input_image_tokens,
            r.cache_read_audio_tokens,
            r.output_audio_tokens,
            r.output_image_tokens,
        )

    def parts(self) -> tuple[int, ...] | None:
        """The disjoint token counts a price is linear in — text uncached, text cache read, 5-minute and 1-hour
        cache writes, audio uncached, image, audio cache read; text, audio and image output — or ``None``
        when the subsets exceed their totals (genai-prices refuses such a usage)."""
        c1h = min(self.cache_write_1h, self.cache_write)
        acr = self.cache_read_audio
        ain, cr = self.input_audio - acr, self.cache_read - acr
        text = self.input - self.cache_read - self.cache_write - ain - self.input_image
        tout = self.output - self.output_audio - self.output_image
        out = (text, cr, self.cache_write - c1h, c1h, ain, self.input_image, acr, tout, self.output_audio)
        return (*out, self.output_image) if min(*out, acr, self.output_image) >= 0 else None


class Quote(ABC):
    """One price sheet resolved for one call (a price-file rule, or a genai-prices model in a context)."""

    source: CostSource
    version: str

    @abstractmethod
    def __call__(self, t: Tokens) -> tuple[float, float]:
        """``(input USD, output USD)`` for ``t``."""

    @abstractmethod
    def tool_price(self, kind: str) -> float | None:
        """USD per use of server tool ``kind``; ``None``: this price sheet has none."""

    def request_fee(self) -> float:
        """USD billed per request whatever its tokens (Perplexity's Sonar: its web search, $12 per 1000
        requests in genai-prices); 0 for a sheet without one."""
        return 0.0


class RuleQuote(Quote):
    def __init__(self, rule: PriceRule) -> None:
        self.rule, self.source, self.version = rule, "price_file", rule.version

    def __call__(self, t: Tokens) -> tuple[float, float]:
        rule = self.rule

        def pick(v: float | None, default: float) -> float:
            return v if v is not None else default

        cr = pick(rule.cache_read_mtok, rule.input_mtok)
        cw = pick(rule.cache_write_mtok, rule.input_mtok)
        per = (  # USD per Mtok of each of Tokens.parts()
            rule.input_mtok,
            cr,
            cw,
            pick(rule.cache_write_1h_mtok, cw),
            pick(rule.input_audio_mtok, rule.input_mtok),
            pick(rule.input_image_mtok, rule.input_mtok),
            pick(rule.cache_read_audio_mtok, cr),
            rule.output_mtok,
            pick(rule.output_audio_mtok, rule.output_mtok),
            pick(rule.output_image_mtok, rule.output_mtok),
        )
        parts = t.parts() or Tokens(t.input, t.output, t.cache_read, t.cache_write, t.cache_write_1h).parts()
        counts = [max(n, 0) for n in parts or (t.input, 0, 0, 0, 0, 0, 0, t.output, 0, 0)]
        inp = sum(n * p for n, p in zip(counts[:7], per[:7], strict=True))
        out = sum(n * p for n, p in zip(counts[7:], per[7:], strict=True))
        return inp / 1e6, out / 1e6

    def tool_price(self, kind: str) -> float | None:
        return self.rule.tool_price(kind)


class GenaiQuote(Quote):
    """genai-prices for ``model`` at ``provider_id`` (``None``: found by the model name alone)."""

    def __init__(self, provider_id: str | None, model: str, context: dict[str, str], when: datetime) -> None:
        from genai_prices import __version__

        self.provider_id, self.model, self.context, self.when = provider_id, model, context, when
        self.source = "genai-prices" if provider_id else "genai-prices:model"
        self.version = __version__

    def _linear(self) -> Linear | None:
        # One probe per hour and per time-of-day price in force: DeepSeek's off-peak prices start at :30 (16:30 UTC),
        # so an hour alone gave a 16:45 call the price of the first call of its hour.
        hour = int(self.when.timestamp()) // 3600
        key = (self.provider_id, self.model, tuple(sorted(self.context.items())), hour, self._dayparts())
        try:
            return _LINEAR[key]
        except KeyError:
            lin = _LINEAR[key] = Linear.probe(self.calc)
            if len(_LINEAR) > MAX_REMEMBERED:  # bounded like the model sets: arbitrary names must not grow it
                _LINEAR.clear()
            return lin

    def _dayparts(self) -> tuple[bool, ...]:
        """Which of the model's time-of-day prices (genai-prices' ``TimeOfDateConstraint``, its prices or
        variants) are in force at ``when``: ``()`` for a model without any, or that genai-prices does not know."""
        ref = (self.provider_id, self.model)
        try:
            parts = _DAYPARTS[ref]
        except KeyError:
            parts = _DAYPARTS[ref] = _time_of_day_constraints(self)
            if len(_DAYPARTS) > MAX_REMEMBERED:
                _DAYPARTS.clear()
        return tuple(c.active(self.when) for c in parts)

    def __call__(self, t: Tokens) -> tuple[float, float]:
        lin = self._linear()
        parts = t.parts() if lin is not None else None
        inp, out = lin(parts) if lin is not None and parts is not None else self.calc(t)[:2]
        return float(inp), float(out)

    def tool_price(self, kind: str) -> float | None:
        unit = TOOL_UNITS.get(kind)
        lin = self._linear()
        if unit is None:
            return None
        per = lin.units.get(unit) if lin is not None else self.unit_price(unit)
        return None if per is None else float(per)

    def request_fee(self) -> float:
        if self._linear() is not None:
            return 0.0  # a linear sheet has no fee per request (Linear.probe: nothing for no tokens)
        per = self.unit_price("requests")
        return 0.0 if per is None else float(per)

    def unit_price(self, unit: str) -> Decimal | None:
        """genai-prices' USD per one ``unit`` (its ``<unit>_kcount`` price / 1000) for this model, if it has one."""
        per_k = getattr(self.calc(Tokens(0))[3].model_price, f"{unit}_kcount", None)
        return None if per_k is None else Decimal(per_k) / 1000

    def calc(self, t: Tokens) -> tuple[Decimal, Decimal, Decimal, Any]:
        """genai-prices' own calculation (``calc_price``) for ``t``: input, output, the tool fees (its total
        beyond input and output) and the calculation itself."""
        from genai_prices import Usage, calc_price

        usage = Usage(
            input_tokens=t.input,
            output_tokens=t.output,
            cache_read_tokens=t.cache_read or None,
            cache_write_tokens=t.cache_write or None,
            cache_write_1h_tokens=min(t.cache_write_1h, t.cache_write) or None,
            input_audio_tokens=t.input_audio or None,
            input_image_tokens=t.input_image or None,
            output_audio_tokens=t.output_audio or None,
            output_image_tokens=t.output_image or None,
            **_overlaps(t),
            **{unit: n for unit, n in t.units if n},
        )
        calc = calc_price(
            usage,
            model_ref=self.model,
            provider_id=self.provider_id,
            genai_request_timestamp=self.when,
            price_context=self.context or None,
        )
        return calc.input_price, calc.output_price, calc.total_price - calc.input_price - calc.output_price, calc


def _time_of_day_constraints(q: GenaiQuote) -> tuple[Any, ...]:
    from genai_prices.types import TimeOfDateConstraint

    try:
        model = q.calc(Tokens(0))[3].model
    except Exception:  # a model genai-prices does not know: nothing to tell apart
        return ()
    found = [c.constraint for c in model.prices] if isinstance(model.prices, list) else []
    found += [v.constraint for v in model.price_variants or ()]
    return tuple(c for c in found if isinstance(c, TimeOfDateConstraint))


def _overlaps(t: Tokens) -> dict[str, int]:
    """The modality subsets of the cache counts, explicit wherever genai-prices needs them (a usage with both
    cache reads and audio input must say how much audio was read from the cache): cached audio as reported,
    no cached images and no audio or images in cache writes (no provider reports those)."""
    out = {}
    for cache, count, modalities in (
        ("read", t.cache_read, ("audio", "image")),
        ("write", t.cache_write, ("audio", "image")),
    ):
        for m in modalities:
            if count and (t.input_audio if m == "audio" else t.input_image):
                out[f"cache_{m}_{cache}_tokens"] = t.cache_read_audio if (m, cache) == ("audio", "read") else 0
    if t.cache_read_audio and "cache_audio_read_tokens" not in out:
        out["cache_audio_read_tokens"] = t.cache_read_audio
    return out


_M = 1_000_000
# Usages the linear form is checked against before it is trusted (small, mixed, modal, and past every tier
# threshold).
_CHECKS = (
    Tokens(1, 1),
    Tokens(3_917, 211, 1_024, 512, 256),
    Tokens(150_000, 9_000, 40_000, 30_000, 0),
    Tokens(1_250_000, 70_000, 600_000, 300_000, 100_000),
    Tokens(40_000_000, 1_000_000, 0, 0, 0),
    Tokens(9_000, 3_000, 2_000, 0, 0, 5_000, 1_000, 700, 2_000, 300),
    Tokens(300_000, 60_000, 100_000, 20_000, 0, 150_000, 40_000, 50_000, 30_000, 10_000),
)
# The basis Linear probes: a million tokens of each of Tokens.parts(), alone.
_BASIS = (
    Tokens(_M),
    Tokens(_M, cache_read=_M),
    Tokens(_M, cache_write=_M),
    Tokens(_M, cache_write=_M, cache_write_1h=_M),
    Tokens(_M, input_audio=_M),
    Tokens(_M, input_image=_M),
    Tokens(_M, cache_read=_M, input_audio=_M, cache_read_audio=_M),
    Tokens(0, _M),
    Tokens(0, _M, output_audio=_M),
    Tokens(0, _M, output_image=_M),
)
_UNITS = ("web_searches", "storage_searches", "code_executions")


class Linear:
    """A model's genai-prices prices for one context and hour as a price per token of each disjoint part of a
    usage (:meth:`Tokens.parts`: text, cache reads and writes, audio, images) and a price per tool unit,
    probed once through ``calc_price`` (a million tokens of each part) — used only when they are linear:
    ``calc_price`` itself gives the same amounts, to the last digit, on :data:`_CHECKS` (no tiers crossed,
    no fee per request). A call is then ten products instead of genai-prices' decomposition."""

    __slots__ = ("per", "units")

    def __init__(self, per: tuple[Decimal, ...], units: dict[str, Decimal]) -> None:
        self.per, self.units = per, units

    def __call__(self, parts: tuple[int, ...]) -> tuple[Decimal, Decimal]:
        inp = sum((n * p for n, p in zip(parts[:7], self.per[:7], strict=True)), Decimal(0))
        out = sum((n * p for n, p in zip(parts[7:], self.per[7:], strict=True)), Decimal(0))
        return inp / _M, out / _M

    @classmethod
    def probe(cls, calc: Callable[[Tokens], tuple[Decimal, Decimal, Decimal, Any]]) -> Linear | None:
        try:
            zero = calc(Tokens(0))
            if zero[:3] != (0, 0, 0):
                return None  # a fee per request
            per = tuple(calc(b)[0] if b.input else calc(b)[1] for b in _BASIS)
            units: dict[str, Decimal] = {}
            for unit in _UNITS:
                per_k = getattr(zero[3].model_price, f"{unit}_kcount", None)
                if per_k is not None:
                    units[unit] = Decimal(per_k) / 1000
            lin = cls(per, units)
            for t in _CHECKS:
                parts = t.parts()
                if parts is None or lin(parts) != calc(t)[:2]:
                    return None
            return lin
        except Exception:  # an inconsistent probe (a model without some field's price): use calc_price
            return None


_LINEAR: dict[tuple[str | None, str, tuple[tuple[str, str], ...], int, tuple[bool, ...]], Linear | None] = {}
_DAYPARTS: dict[tuple[str | None, str], tuple[Any, ...]] = {}  # (provider, model) → its time-of-day constraints
