"""The user's price file (``--prices FILE``, JSON or TOML): prices in USD per million tokens, and per use for
server-side tools. The first rule that matches a call wins (put tier-specific rules first)::

    [[price]]
    provider = "vllm"            # optional; "*" or absent matches any provider
    model = "llama-3.1-70b*"     # exact name or shell-style pattern
    service_tier = "flex"        # optional: only calls served at this tier
    input_mtok = 0.50
    output_mtok = 1.00
    cache_read_mtok = 0.05       # optional, default: input_mtok
    cache_write_mtok = 0.60      # optional, default: input_mtok (5-minute writes)
    cache_write_1h_mtok = 1.00   # optional, default: cache_write_mtok (1-hour writes)
    input_audio_mtok = 4.0       # optional, default: input_mtok (likewise input_image_mtok)
    cache_read_audio_mtok = 0.4  # optional, default: cache_read_mtok
    output_audio_mtok = 8.0      # optional, default: output_mtok (likewise output_image_mtok)
    tools = { web_search = 0.01 }  # optional: USD per server-side tool use, by kind (server_tool_calls)

    [[price]]                    # no token prices: the entry prices only tools, the tokens come from
    provider = "anthropic"       # genai-prices (or a later rule) — for units genai-prices lacks
    model = "claude-*"
    tools = { web_fetch = 0.0, code_execution = 0.05 }
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import LlmtapError
from ..record import SERVER_TOOLS

_OPTIONAL = (
    "cache_read_mtok",
    "cache_write_mtok",
    "cache_write_1h_mtok",
    "input_audio_mtok",
    "input_image_mtok",
    "cache_read_audio_mtok",
    "output_audio_mtok",
    "output_image_mtok",
)


class PriceFileError(LlmtapError, ValueError):
    pass


@dataclass(frozen=True, slots=True)
class PriceRule:
    model: str
    input_mtok: float = 0.0
    output_mtok: float = 0.0
    provider: str = "*"
    cache_read_mtok: float | None = None
    cache_write_mtok: float | None = None
    service_tier: str = ""  # '' matches every tier
    cache_write_1h_mtok: float | None = None
    version: str = ""  # the price file's content hash (price_version)
    input_audio_mtok: float | None = None
    input_image_mtok: float | None = None
    cache_read_audio_mtok: float | None = None
    output_audio_mtok: float | None = None
    output_image_mtok: float | None = None
    tools: tuple[tuple[str, float], ...] = ()  # USD per use, by server tool kind
    tools_only: bool = False  # no token prices: the rule prices only its tools

    def matches(self, provider: str, model: str, tier: str = "") -> bool:
        return (
            (self.provider in ("*", "", provider))
            and (not self.service_tier or self.service_tier == tier)
            and fnmatch.fnmatchcase(model, self.model)
        )

    def tool_price(self, kind: str) -> float | None:
        return next((usd for k, usd in self.tools if k == kind), None)


def _opt(entry: dict[str, Any], key: str) -> float | None:
    return float(entry[key]) if key in entry else None


def _tools(entry: dict[str, Any]) -> tuple[tuple[str, float], ...]:
    tools = entry.get("tools", {})
    if not isinstance(tools, dict):
        raise TypeError("tools must be a table of kind = USD per use")
    unknown = [k for k in tools if k not in SERVER_TOOLS]
    if unknown:
        raise ValueError(f"unknown tool kind(s) {', '.join(map(str, unknown))}; known: {', '.join(SERVER_TOOLS)}")
    return tuple((str(k), float(v)) for k, v in tools.items())


def _rule(entry: Any, version: str) -> PriceRule:
    tools = _tools(entry)
    tools_only = "input_mtok" not in entry and "output_mtok" not in entry and bool(tools)
    return PriceRule(
        model=str(entry["model"]),
        provider=str(entry.get("provider", "*")),
        input_mtok=0.0 if tools_only else float(entry["input_mtok"]),
        output_mtok=0.0 if tools_only else float(entry["output_mtok"]),
        service_tier=str(entry.get("service_tier", "")),
        version=version,
        tools=tools,
        tools_only=tools_only,
        **{k: _opt(entry, k) for k in _OPTIONAL},
    )


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
            rules.append(_rule(entry, version))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise PriceFileError(
                f"{path}: price #{i + 1} is invalid ({err!r}); needs model, input_mtok, output_mtok (or tools)"
            ) from None
    return rules
