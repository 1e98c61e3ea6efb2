"""``explain-cost``: the periods (shared with ``explain-latency``, :mod:`.explain_latency`), the one SQL
(:mod:`.explain_sql`), and its rows as the contract's JSON and as text. Used by the CLI and the viewer.

Nothing here computes a number: every value comes from the SQL's rows, so the CLI, the viewer's
explain page and the Grafana panels agree.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..durations import parse_duration
from ..errors import LlmtapError
from .explain_sql import COST_DRIVERS, explain_cost_sql

RowsFn = Callable[[str], list[dict[str, Any]]]
_DAYS = re.compile(r"\s*(\d+)\s*d\s*")


class ExplainError(LlmtapError, ValueError):
    pass


@dataclass(frozen=True)
class Periods:
    """The window ``[end - window_s, end)`` and its baseline: ``n`` windows, the k-th ``k * step_s`` earlier."""

    end: float
    window_s: int
    baseline: str
    n: int
    step_s: int

    @classmethod
    def parse(cls, window: str, baseline: str, end: float | None = None) -> Periods:
        try:
            w = int(parse_duration(window))
        except ValueError as e:
            raise ExplainError(f"--window: {e}") from None
        if w < 60:
            raise ExplainError("--window must be at least 1m")
        b = (baseline or "").strip().lower()
        if b == "previous":
            n, step = 1, w
        elif m := _DAYS.fullmatch(b):
            n, step = int(m.group(1)), 86400
            if not 1 <= n <= 90:
                raise ExplainError("--baseline Nd takes 1 to 90 days")
            if w > step:
                raise ExplainError("--baseline Nd compares the same window on previous days: --window must be ≤ 1d")
        else:
            raise ExplainError(f"--baseline takes 'previous' or a number of days like 7d; got {baseline!r}")
        return cls(
            float(end if end is not None else time.time()), w, "previous" if n == 1 and step == w else b, n, step
        )

    def sql_args(self) -> dict[str, str]:
        return {"t1": repr(round(self.end, 6)), "w": str(self.window_s), "n": str(self.n), "step": str(self.step_s)}

    def describe(self) -> tuple[dict[str, Any], dict[str, Any]]:
        window = {"from": iso(self.end - self.window_s), "to": iso(self.end), "seconds": self.window_s}
        periods = [
            {"from": iso(self.end - k * self.step_s - self.window_s), "to": iso(self.end - k * self.step_s)}
            for k in range(1, self.n + 1)
        ]
        return window, {"spec": self.baseline, "periods": periods, "averaged_over": self.n}


def parse_end(text: str | None) -> float | None:
    """``--end``: unix seconds or an ISO-8601 time (UTC unless it says otherwise)."""
    if not text:
        return None
    bad = ExplainError(f"--end takes unix seconds or an ISO time like 2025-06-01T18:00; got {text!r}")
    try:
        t = float(text)
    except ValueError:
        try:
            dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise bad from None
        t = (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()
    if not 0 < t < 1e11:  # also NaN and infinities
        raise bad
    return t


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# -- cost --------------------------------------------------------------------------------------------------------


def explain_cost(rows: RowsFn, periods: Periods, by: Sequence[str], where: str = "1=1") -> dict[str, Any]:
    """The contract's JSON: window, baseline, cost_usd, baseline_cost_usd, delta_usd, drivers."""
    try:
        sql = explain_cost_sql(by, where=where, **periods.sql_args())
    except ValueError as e:
        raise ExplainError(str(e)) from None
    out = rows(sql)
    total = next((r for r in out if r["driver"] == "total"), None)
    window, baseline = periods.describe()
    drivers = [
        {
            "driver": r["driver"],
            "key": {b: r[b] for b in dict.fromkeys(by)},
            "delta_usd": r["delta_usd"],
            "before": num(r["before"]),
            "after": num(r["after"]),
            "detail": r["detail"],
        }
        for r in out
        if r["driver"] != "total"
    ]
    return {
        "window": window,
        "baseline": baseline,
        "by": list(dict.fromkeys(by)),
        "cost_usd": total["after"] if total else 0.0,
        "baseline_cost_usd": total["before"] if total else 0.0,
        "delta_usd": total["delta_usd"] if total else 0.0,
        "drivers": drivers,
    }


def num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def usd(x: float, sign: bool = False) -> str:
    s = "-" if x < 0 else ("+" if sign else "")
    a = abs(x)
    body = f"{a:,.0f}" if a >= 100 else f"{a:,.2f}" if a >= 0.01 else f"{a:.2g}"
    return f"{s}${body}"


def _pct(before: float | None, after: float | None) -> str:
    if not before or after is None:
        return ""
    r = after / before
    return f"×{r:.2g}" if r >= 2 or r <= 0.5 else f"{(r - 1) * 100:+.0f}%"


def key_label(key: dict[str, str]) -> str:
    return "/".join(v for v in key.values() if v) or "(none)"


def driver_phrase(d: dict[str, Any]) -> str:
    """One driver as words: "summarize output tokens per call ×2.5 (400 → 1000) since prompt_version v7"."""
    k, b, a, detail = key_label(d["key"]), d["before"], d["after"], d["detail"]
    kind = d["driver"]
    if kind == "volume":
        text = f"{k} volume {_pct(b, a)} ({_n(b)} → {_n(a)} calls)"
    elif kind == "mix":
        text = f"{k} mix: {detail} share {_share(b)} → {_share(a)}"
    elif kind in ("input_tokens_per_call", "output_tokens_per_call"):
        what = kind.removesuffix("_per_call").replace("_", " ")
        text = f"{k} {what} per call {_pct(b, a)} ({_n(b)} → {_n(a)})" + (f" {detail}" if detail else "")
    elif kind == "cache_hit_ratio":
        text = f"{k} cache hit ratio {_share(b)} → {_share(a)}"
    elif kind == "unit_price":
        text = f"{k} unit price {_pct(b, a)} (list ${_n(b)} → ${_n(a)} per Mtok)" + (f", {detail}" if detail else "")
    elif kind == "modality_mix":  # actual ÷ text-rate cost: audio and images priced above text
        text = f"{k} modality mix: audio/image cost factor ×{_n(b)} → ×{_n(a)}"
    elif kind == "tool_calls":
        text = f"{k} server tool fees per call ${_n(b)} → ${_n(a)}"
    elif kind == "new":
        text = f"{k} new" + (f" ({detail})" if detail and detail not in k else "")
    elif kind == "gone":
        text = f"{k} gone" + (f" ({detail})" if detail and detail not in k else "")
    else:
        text = f"{k} retries {_n(b)} → {_n(a)} calls"
    return f"{text} {usd(d['delta_usd'], sign=True)}"


def _n(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _share(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.0f}%"


def cost_text(res: dict[str, Any], top: int = 12) -> str:
    delta, base = res["delta_usd"], res["baseline_cost_usd"]
    pct = f" ({delta / base * 100:+.0f}%)" if base else ""
    w, b = res["window"], res["baseline"]
    head = f"cost {usd(res['cost_usd'])} in [{w['from']}, {w['to']}) vs {usd(base)} " + (
        "in the window before"
        if b["spec"] == "previous"
        else f"averaged over the same window on {b['averaged_over']} previous days"
    )
    drivers = res["drivers"]
    if not drivers:
        return f"{head}\n{usd(delta, sign=True)}{pct}: no change to explain"
    # the main drivers: the largest ones that together explain most of the change
    shown = [d for d in drivers[:top] if abs(d["delta_usd"]) >= 0.01 * max(abs(delta), 1e-12)] or drivers[:1]
    summary = "; ".join(driver_phrase(d) for d in shown[:5])
    lines = [head, f"{usd(delta, sign=True)}{pct}: {summary}", ""]
    table = [["driver", "key", "delta_usd", "before", "after", "detail"]]
    for d in drivers[:top]:
        table.append(
            [
                d["driver"],
                key_label(d["key"]),
                usd(d["delta_usd"], sign=True),
                _n(d["before"]),
                _n(d["after"]),
                d["detail"],
            ]
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines += ["  ".join(c.ljust(wd) for c, wd in zip(r, widths, strict=True)).rstrip() for r in table]
    if len(drivers) > top:
        rest = sum(d["delta_usd"] for d in drivers[top:])
        lines.append(f"… {len(drivers) - top} more drivers, {usd(rest, sign=True)} together (--format json lists all)")
    return "\n".join(lines)


__all__ = ["COST_DRIVERS", "ExplainError", "Periods", "RowsFn", "cost_text", "explain_cost", "parse_end", "usd"]
