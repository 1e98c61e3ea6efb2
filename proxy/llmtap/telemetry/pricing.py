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

Price file (``--prices FILE``, JSON or TOML), prices in USD per million tokens; the first rule that
matches a call wins (put tier-specific rules first)::

    [[price]]
    provider = "vllm"            # optional; "*" or absent matches any provider
    model = "llama-3.1-70b*"     # exact name or shell-style pattern
    service_tier = "flex"        # optional: only calls served at this tier
    input_mtok = 0.50
    output_mtok = 1.00
    cache_read_mtok = 0.05       # optional, default: input_mtok
    cache_write_mtok = 0.60      # optional, default: input_mtok (5-minute writes)
    cache_write_1h_mtok = 1.00   # optional, default: cache_write_mtok (1-hour writes)
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from ..errors import LlmtapError
from ..providers import genai_prices_id, priced_by_model, self_hosted
from ..record import CallRecord, CostSource

log = logging.getLogger("llmtap.pricing")

MAX_REMEMBERED = 10_000  # (provider, model) lookups remembered, known or unknown (model names come from requests)

LookupResult = Literal["hit", "model_only", "miss"]
"""``llmtap_price_lookups_total{result}``: priced with the provider's price (or a price file), priced
by the model name alone, or not priced."""


class PriceFileError(LlmtapError, ValueError):
    pass


@dataclass(frozen=True, slots=True)
class PriceRule:
    model: str
    input_mtok: float
    output_mtok: float
    provider: str = "*"
    cache_read_mtok: float | None = None
    cache_write_mtok: float | None = None
    service_tier: str = ""  # '' matches every tier
    cache_write_1h_mtok: float | None = None
    version: str = ""  # the price file's content hash (price_version)

    def matches(self, provider: str, model: str, tier: str = "") -> bool:
        return (
            (self.provider in ("*", "", provider))
            and (not self.service_tier or self.service_tier == tier)
            and fnmatch.fnmatchcase(model, self.model)
        )


def _opt(entry: dict[str, Any], key: str) -> float | None:
    return float(entry[key]) if key in entry else None


def load_price_file(path: Path) -> list[PriceRule]:
    try:
        raw = path.read_bytes()
        text = raw.decode()
        data: Any = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as e:
        raise PriceFileError(f"cannot read price file {path}: {e}") from None
    version = hashlib.sha256(raw).hexdigest()[:12]
    entries = data.get("price") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise PriceFileError(f"{path}: expected a list of prices under 'price'")
    rules = []
    for i, entry in enumerate(entries):
        try:
            rules.append(
                PriceRule(
                    model=str(entry["model"]),
                    provider=str(entry.get("provider", "*")),
                    input_mtok=float(entry["input_mtok"]),
                    output_mtok=float(entry["output_mtok"]),
                    cache_read_mtok=_opt(entry, "cache_read_mtok"),
                    cache_write_mtok=_opt(entry, "cache_write_mtok"),
                    service_tier=str(entry.get("service_tier", "")),
                    cache_write_1h_mtok=_opt(entry, "cache_write_1h_mtok"),
                    version=version,
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise PriceFileError(
                f"{path}: price #{i + 1} is invalid ({err!r}); needs model, input_mtok, output_mtok"
            ) from None
    return rules


@dataclass(frozen=True, slots=True)
class Tokens:
    """A usage to price, in the contract's terms (``input`` includes cache reads and writes)."""

    input: int
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0  # subset of cache_write

    @classmethod
    def of(cls, r: CallRecord) -> Tokens:
        cw = r.cache_write_tokens
        return cls(r.input_tokens, r.output_tokens, r.cache_read_tokens, cw, min(r.cache_write_1h_tokens, cw))


@dataclass(frozen=True, slots=True)
class Price:
    total: float
    input: float
    output: float
    source: CostSource
    uncached_input: float  # the input at the uncached input price, every token (no cache read or write)
    version: str = ""


class Quote:
    """One price sheet resolved for one call (a price-file rule, or a genai-prices model in a context)."""

    source: CostSource
    version: str

    def __call__(self, t: Tokens) -> tuple[float, float]:
        """``(input USD, output USD)`` for ``t``."""
        raise NotImplementedError


class RuleQuote(Quote):
    def __init__(self, rule: PriceRule) -> None:
        self.rule, self.source, self.version = rule, "price_file", rule.version

    def __call__(self, t: Tokens) -> tuple[float, float]:
        rule = self.rule
        cr = rule.cache_read_mtok if rule.cache_read_mtok is not None else rule.input_mtok
        cw = rule.cache_write_mtok if rule.cache_write_mtok is not None else rule.input_mtok
        cw1h = rule.cache_write_1h_mtok if rule.cache_write_1h_mtok is not None else cw
        uncached = max(t.input - t.cache_read - t.cache_write, 0)
        c1h = min(t.cache_write_1h, t.cache_write)
        inp = uncached * rule.input_mtok + t.cache_read * cr + (t.cache_write - c1h) * cw + c1h * cw1h
        return inp / 1e6, t.output * rule.output_mtok / 1e6


class GenaiQuote(Quote):
    """genai-prices for ``model`` at ``provider_id`` (``None``: found by the model name alone)."""

    def __init__(self, provider_id: str | None, model: str, context: dict[str, str], when: datetime) -> None:
        from genai_prices import __version__

        self.provider_id, self.model, self.context, self.when = provider_id, model, context, when
        self.source = "genai-prices" if provider_id else "genai-prices:model"
        self.version = __version__

    def __call__(self, t: Tokens) -> tuple[float, float]:
        key = (self.provider_id, self.model, tuple(sorted(self.context.items())), int(self.when.timestamp()) // 3600)
        try:
            lin = _LINEAR[key]
        except KeyError:
            lin = _LINEAR[key] = Linear.probe(self.calc)
            if len(_LINEAR) > MAX_REMEMBERED:  # bounded like the model sets: arbitrary names must not grow it
                _LINEAR.clear()
        if lin is None:
            inp, out = self.calc(t)
        else:
            inp, out = lin(t)
        return float(inp), float(out)

    def calc(self, t: Tokens) -> tuple[Decimal, Decimal]:
        """genai-prices' own calculation (``calc_price``) for ``t``."""
        from genai_prices import Usage, calc_price

        usage = Usage(
            input_tokens=t.input,
            output_tokens=t.output,
            cache_read_tokens=t.cache_read or None,
            cache_write_tokens=t.cache_write or None,
            cache_write_1h_tokens=min(t.cache_write_1h, t.cache_write) or None,
        )
        calc = calc_price(
            usage,
            model_ref=self.model,
            provider_id=self.provider_id,
            genai_request_timestamp=self.when,
            price_context=self.context or None,
        )
        return calc.input_price, calc.output_price


_M = 1_000_000
# Usages the linear form is checked against before it is trusted (small, mixed, and past every tier threshold).
_CHECKS = (
    Tokens(1, 1),
    Tokens(3_917, 211, 1_024, 512, 256),
    Tokens(150_000, 9_000, 40_000, 30_000, 0),
    Tokens(1_250_000, 70_000, 600_000, 300_000, 100_000),
    Tokens(40_000_000, 1_000_000, 0, 0, 0),
)


class Linear:
    """A model's genai-prices prices for one context and hour as a price per token of each usage field,
    probed once through ``calc_price`` (a million tokens of each field) — used only when they are linear:
    ``calc_price`` itself gives the same amounts, to the last digit, on :data:`_CHECKS` (no tiers crossed,
    no fee per request). A call is then five products instead of genai-prices' decomposition."""

    __slots__ = ("cache_read", "cache_write", "cache_write_1h", "input", "output")

    def __init__(self, inp: Decimal, cr: Decimal, cw: Decimal, cw1h: Decimal, out: Decimal) -> None:
        self.input, self.cache_read, self.cache_write, self.cache_write_1h, self.output = inp, cr, cw, cw1h, out

    def __call__(self, t: Tokens) -> tuple[Decimal, Decimal]:
        c1h = min(t.cache_write_1h, t.cache_write)
        uncached = t.input - t.cache_read - t.cache_write
        inp = uncached * self.input + t.cache_read * self.cache_read
        inp += (t.cache_write - c1h) * self.cache_write + c1h * self.cache_write_1h
        return inp / _M, t.output * self.output / _M

    @classmethod
    def probe(cls, calc: Callable[[Tokens], tuple[Decimal, Decimal]]) -> Linear | None:
        try:
            if calc(Tokens(0)) != (0, 0):
                return None  # a fee per request
            lin = cls(
                calc(Tokens(_M))[0],
                calc(Tokens(_M, cache_read=_M))[0],
                calc(Tokens(_M, cache_write=_M))[0],
                calc(Tokens(_M, cache_write=_M, cache_write_1h=_M))[0],
                calc(Tokens(0, _M))[1],
            )
            if all(lin(t) == calc(t) for t in _CHECKS):
                return lin
        except Exception:  # an inconsistent probe (a model without some field's price): use calc_price
            pass
        return None


_LINEAR: dict[tuple[str | None, str, tuple[tuple[str, str], ...], int], Linear | None] = {}


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
                if rule.matches(r.provider, model, r.service_tier):
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
                uncached = q(Tokens(t.input))[0]
        except Exception as e:  # inconsistent usage (a subset larger than its total), a price source bug
            log.warning("pricing %s/%s failed: %s", r.provider, r.response_model or r.request_model, e)
            return None
        return Price(inp + out, inp, out, q.source, uncached, q.version)

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
            r.cost_source, r.price_version = p.source, p.version
        if self.on_lookup is not None:
            result: LookupResult = "miss" if p is None else "model_only" if p.source == "genai-prices:model" else "hit"
            self.on_lookup(result)
