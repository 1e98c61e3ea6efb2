"""Cost: genai-prices (a maintained price source) first, a user price file on top.

``cost_usd`` stays ``None`` (NULL) when no price is known, never 0. A cost the
provider reported itself (OpenRouter ``usage.cost``) is kept as is.

Price file (``--prices FILE``, JSON or TOML), prices in USD per million tokens::

    [[price]]
    provider = "vllm"            # optional; "*" or absent matches any provider
    model = "llama-3.1-70b*"     # exact name or shell-style pattern
    input_mtok = 0.50
    output_mtok = 1.00
    cache_read_mtok = 0.05       # optional, default: input_mtok
    cache_write_mtok = 0.60      # optional, default: input_mtok
"""

from __future__ import annotations

import fnmatch
import json
import logging
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..providers import genai_prices_id, priced_by_model
from ..record import CallRecord, CostSource

log = logging.getLogger("llmtap.pricing")


class PriceFileError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class PriceRule:
    model: str
    input_mtok: float
    output_mtok: float
    provider: str = "*"
    cache_read_mtok: float | None = None
    cache_write_mtok: float | None = None

    def matches(self, provider: str, model: str) -> bool:
        return (self.provider in ("*", "", provider)) and fnmatch.fnmatchcase(model, self.model)


def load_price_file(path: Path) -> list[PriceRule]:
    try:
        text = path.read_text()
        data: Any = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as e:
        raise PriceFileError(f"cannot read price file {path}: {e}") from None
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
                    cache_read_mtok=float(entry["cache_read_mtok"]) if "cache_read_mtok" in entry else None,
                    cache_write_mtok=float(entry["cache_write_mtok"]) if "cache_write_mtok" in entry else None,
                )
            )
        except (KeyError, TypeError, ValueError) as err:
            raise PriceFileError(
                f"{path}: price #{i + 1} is invalid ({err!r}); needs model, input_mtok, output_mtok"
            ) from None
    return rules


@dataclass(frozen=True, slots=True)
class Price:
    total: float
    input: float
    output: float
    source: CostSource
    uncached_input: float  # the input at the uncached input price, every token (no cache read or write)


class Pricer:
    def __init__(self, rules: list[PriceRule] | None = None) -> None:
        self.rules = rules or []
        self._unknown: set[tuple[str | None, str]] = set()
        self._lock = threading.Lock()

    def price(self, r: CallRecord) -> Price | None:
        models = [m for m in (r.response_model, r.request_model) if m]
        for model in models:
            for rule in self.rules:
                if rule.matches(r.provider, model):
                    return _rule_price(rule, r)
        provider_id = genai_prices_id(r.provider)  # self-hosted servers: price files only
        if provider_id is None and not priced_by_model(r.provider):
            return None
        for model in models:
            key = (provider_id, model)
            with self._lock:
                if key in self._unknown:
                    continue
            p = _genai_price(provider_id, model, r)
            if p is not None:
                return p
            with self._lock:
                self._unknown.add(key)
        return None

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
            r.cost_source = p.source


def _rule_price(rule: PriceRule, r: CallRecord) -> Price:
    cr = rule.cache_read_mtok if rule.cache_read_mtok is not None else rule.input_mtok
    cw = rule.cache_write_mtok if rule.cache_write_mtok is not None else rule.input_mtok
    uncached = max(r.input_tokens - r.cache_read_tokens - r.cache_write_tokens, 0)
    inp = (uncached * rule.input_mtok + r.cache_read_tokens * cr + r.cache_write_tokens * cw) / 1e6
    out = r.output_tokens * rule.output_mtok / 1e6
    return Price(inp + out, inp, out, "price_file", r.input_tokens * rule.input_mtok / 1e6)


def _genai_price(provider_id: str | None, model: str, r: CallRecord) -> Price | None:
    """``provider_id`` ``None``: the model name alone picks the price (``genai-prices:model``)."""
    from genai_prices import Usage, calc_price

    usage = Usage(
        input_tokens=r.input_tokens,
        output_tokens=r.output_tokens,
        cache_read_tokens=r.cache_read_tokens or None,
        cache_write_tokens=r.cache_write_tokens or None,
    )
    try:
        calc = calc_price(usage, model_ref=model, provider_id=provider_id)
    except LookupError:
        return None
    except Exception as e:  # a price source bug must not lose the record
        log.warning("genai-prices failed for %s/%s: %s", provider_id, model, e)
        return None
    uncached = float(calc.input_price)
    if r.cache_read_tokens or r.cache_write_tokens:  # the same input, priced as if no cache were in use
        try:
            no_cache = calc_price(Usage(input_tokens=r.input_tokens), model_ref=model, provider_id=provider_id)
            uncached = float(no_cache.input_price)
        except Exception:
            uncached = float(calc.input_price)
    source: CostSource = "genai-prices" if provider_id else "genai-prices:model"
    return Price(float(calc.total_price), float(calc.input_price), float(calc.output_price), source, uncached)
