"""Durations as people write them: ``30s``, ``15m``, ``1h``, ``7d``, ``2w``, ``1.5h``, or bare seconds."""

from __future__ import annotations

import re

_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str) -> float:
    """Seconds in ``text``; raises :class:`ValueError` with a message naming the accepted forms."""
    m = _RE.fullmatch(text or "")
    if not m:
        raise ValueError(f"expected a duration like 30s, 15m, 1h or 7d; got {text!r}")
    return float(m.group(1)) * _UNIT_S[(m.group(2) or "").lower()]
