"""Content-event timing: TTFT, decode time and inter-token latency from wire timestamps."""

from __future__ import annotations

import math

MAX_GAPS = 200_000  # bounded memory on endless streams; later gaps still update max/last


class ContentClock:
    """Timestamps (monotonic seconds) of content-bearing events, in arrival order."""

    __slots__ = ("count", "first", "gap_max", "gaps", "last")

    def __init__(self) -> None:
        self.first: float | None = None
        self.last: float | None = None
        self.count = 0
        self.gaps: list[float] = []
        self.gap_max = 0.0

    def mark(self, t: float) -> None:
        if self.last is None:
            self.first = t
        else:
            gap = t - self.last
            if gap > self.gap_max:
                self.gap_max = gap
            if len(self.gaps) < MAX_GAPS:
                self.gaps.append(gap)
        self.last = t
        self.count += 1


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        raise ValueError("no values")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac
