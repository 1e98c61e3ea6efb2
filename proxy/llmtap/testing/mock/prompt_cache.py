"""A prompt cache that behaves like Anthropic's, for the mock's ``prompt_cache`` scenario.

The prompt is its blocks in cache order — each tool, each system block, each message — and a
block carrying ``cache_control`` is a breakpoint. A request reads the longest cached prefix that
ends at a breakpoint or at one of the 20 blocks before it (as Anthropic looks back from each
breakpoint), writes the rest up to its last breakpoint (with that breakpoint's TTL: ``"ttl":
"1h"`` or the 5-minute default), and pays the blocks after it as plain input. A read refreshes
the entry's TTL. Entries are per credential and model; the ``cache_control`` markers themselves
are not part of a prefix. ``x-mock-cache-ttl: SECONDS`` stands for the 5-minute TTL (the 1-hour
one is 12 times it), so a test can let the cache expire.

Tokens are counted as one per 4 bytes of a block's canonical JSON (at least one): the numbers
only need to be consistent, as a provider's are.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

LOOKBACK = 20
_entries: dict[bytes, tuple[float, float]] = {}  # prefix hash → (expires at, ttl)


def _strip(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if k != "cache_control"}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v


def _marked(v: Any) -> dict[str, Any] | None:
    """The block's cache_control (its own, or one inside its content)."""
    if isinstance(v, dict):
        cc = v.get("cache_control")
        if isinstance(cc, dict):
            return cc
        for x in v.values():
            if isinstance(x, (dict, list)) and (found := _marked(x)) is not None:
                return found
    elif isinstance(v, list):
        for x in v:
            if (found := _marked(x)) is not None:
                return found
    return None


def blocks(body: dict[str, Any]) -> list[Any]:
    system = body.get("system")
    return [
        *(body.get("tools") or []),
        *(system if isinstance(system, list) else [system] if system else []),
        *(body.get("messages") or []),
    ]


def tokens(block: Any) -> int:
    return max(1, len(json.dumps(_strip(block), sort_keys=True, separators=(",", ":"))) // 4)


def usage(body: dict[str, Any], scope: str, ttl_5m: float = 300.0, now: float | None = None) -> dict[str, Any]:
    """Anthropic's ``usage`` for ``body``, reading and writing the cache."""
    now = time.time() if now is None else now
    if len(_entries) > 100_000:
        _entries.clear()
    parts = blocks(body)
    sizes = [tokens(b) for b in parts]
    marks = [_marked(b) for b in parts]
    prefix: list[bytes] = []
    h = hashlib.blake2b(f"{scope}|{body.get('model')}".encode(), digest_size=16).digest()
    for b in parts:
        h = hashlib.blake2b(h + json.dumps(_strip(b), sort_keys=True).encode(), digest_size=16).digest()
        prefix.append(h)
    points = [i for i, m in enumerate(marks) if m is not None]
    read_to = -1  # the last block read from the cache
    for bp in reversed(points):
        for j in range(bp, max(bp - LOOKBACK, -1), -1):
            entry = _entries.get(prefix[j])
            if entry is not None and entry[0] > now:
                read_to = j
                _entries[prefix[j]] = (now + entry[1], entry[1])  # a read refreshes the TTL
                break
        if read_to >= 0:
            break
    last = points[-1] if points else -1
    write_5m = write_1h = 0
    for bp in points:
        mark = marks[bp] or {}
        ttl = ttl_5m * 12 if mark.get("ttl") == "1h" else ttl_5m
        start = max(read_to + 1, max((p + 1 for p in points if p < bp), default=0))
        written = sum(sizes[start : bp + 1]) if bp > read_to else 0
        if mark.get("ttl") == "1h":
            write_1h += written
        else:
            write_5m += written
        if bp > read_to or prefix[bp] not in _entries:
            _entries[prefix[bp]] = (now + ttl, ttl)
    return {
        "input_tokens": sum(sizes[last + 1 :]),
        "cache_creation_input_tokens": write_5m + write_1h,
        "cache_read_input_tokens": sum(sizes[: read_to + 1]),
        "cache_creation": {"ephemeral_5m_input_tokens": write_5m, "ephemeral_1h_input_tokens": write_1h},
        "output_tokens": 1,
        "service_tier": "standard",
    }
