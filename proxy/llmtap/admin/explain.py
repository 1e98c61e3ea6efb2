"""``explain-cost`` and ``explain-latency``: periods, the one SQL of each (:mod:`.explain_sql`,
:mod:`.latency_sql`), and its rows as the contract's JSON and as text. Used by the CLI and the viewer.

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
from .explain_sql import COST_DRIVERS, explain_cost_sql
from .latency_sql import LATENCY_COMPONENTS, explain_latency_sql

RowsFn = Callable[[str], list[dict[str, Any]]]
_DAYS = re.compile(r"\s*(\d+)\s*d\s*")


class ExplainError(ValueError):
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
        window = {"from": _iso(self.end - self.window_s), "to": _iso(self.end), "seconds": self.window_s}
        periods = [
            {"from": _iso(self.end - k * self.step_s - self.window_s), "to": _iso(self.end - k * self.step_s)}
            for k in range(1, self.n + 1)
        ]
        return window, {"spec": self.baseline, "periods": periods, "averaged_over": self.n}


def parse_end(text: str | None) -> float | None:
    """``--end``: unix seconds or an ISO-8601 time (UTC unless it says otherwise)."""
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ExplainError(f"--end takes unix seconds or an ISO time like 2025-06-01T18:00; got {text!r}") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _iso(t: float) -> str:
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
            "before": _num(r["before"]),
            "after": _num(r["after"]),
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


def _num(v: Any) -> float | None:
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


# -- latency -----------------------------------------------------------------------------------------------------

LABELS = {
    "decode": "decode",
    "ttfb": "TTFB",
    "prefill": "prefill→first token",
    "decode_length": "decode length",
    "time_per_token": "time per token",
    "other": "after last token",
    "retries": "retries",
    "rate_limit_wait": "rate-limit waits",
}


def explain_latency(
    rows: RowsFn, periods: Periods, metric: str = "duration", quantile: float = 0.95, where: str = "1=1"
) -> dict[str, Any]:
    try:
        a = periods.sql_args()
        sql = explain_latency_sql(
            metric=metric, quantile=quantile, where=where, t1=a["t1"], w=a["w"], n=a["n"], step=a["step"]
        )
    except ValueError as e:
        raise ExplainError(str(e)) from None
    out = rows(sql)
    window, baseline = periods.describe()
    cells: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
    for r in out:
        hour = "" if r["level"] != "hour" else str(r["hour"]).replace(" ", "T") + "Z"
        key = (r["level"], r["provider"], r["server_address"], r["model"], hour)
        c = cells.setdefault(
            key,
            {
                "level": r["level"],
                "key": {"provider": r["provider"], "server_address": r["server_address"], "model": r["model"]},
                "hour": hour,
                "calls_before": r["calls_before"],
                "calls_after": r["calls_after"],
                "components": [],
            },
        )
        if r["component"] == "total":
            c.update(before_ms=_num(r["before_ms"]), after_ms=_num(r["after_ms"]), band_delta_ms=r["delta_ms"])
        else:
            c["components"].append(
                {
                    "component": r["component"],
                    "delta_ms": r["delta_ms"],
                    "before_ms": _num(r["before_ms"]),
                    "after_ms": _num(r["after_ms"]),
                }
            )
    overall = next((c for c in cells.values() if c["level"] == "all"), None)
    rest = [c for c in cells.values() if c["level"] != "all"]
    rest.sort(key=lambda c: -abs((c.get("after_ms") or 0) - (c.get("before_ms") or 0)))
    q = f"p{round(quantile * 100):g}"
    return {
        "window": window,
        "baseline": baseline,
        "metric": metric,
        "quantile": q,
        "value_ms": overall["after_ms"] if overall else None,
        "baseline_ms": overall["before_ms"] if overall else None,
        "delta_ms": (overall["after_ms"] - overall["before_ms"]) if overall else None,
        "components": overall["components"] if overall else [],
        "cells": rest,
        "findings": findings(rest, q),
    }


def _ms(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v / 1000:.2f} s" if abs(v) >= 1000 else f"{v:.0f} ms"


DECODE = ("decode_length", "time_per_token")


def _ratio(x: dict[str, Any]) -> float | None:
    b, a = x["before_ms"], x["after_ms"]
    return a / b if b and a is not None and b > 0 else None


def _moved(cell: dict[str, Any], comp: dict[str, Any], min_ratio: float) -> bool:
    """A component moved in a cell: it adds at least 5% of the cell's baseline (and 20 ms), and its own
    quantile (for decode length: the output tokens) rose by ``min_ratio``."""
    r = _ratio(comp)
    floor = max(0.05 * (cell.get("before_ms") or 0), 20.0)
    return comp["delta_ms"] >= floor and r is not None and r >= min_ratio


def findings(cells: list[dict[str, Any]], q: str, min_ratio: float = 1.5) -> list[dict[str, Any]]:
    """The slowdowns worth a sentence: per server and component, the hours (merged when contiguous) where
    that component moved, with the models it moved on and the components that did not move there."""
    hours: dict[str, set[str]] = {}  # per server, the hours with enough calls to compare
    for c in cells:
        if c["level"] == "hour":
            hours.setdefault(c["key"]["server_address"], set()).add(c["hour"])
    moved: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for c in cells:
        if c["level"] != "hour":
            continue
        for comp in c["components"]:
            if _moved(c, comp, min_ratio):
                key = (c["key"]["server_address"], comp["component"])
                moved.setdefault(key, {}).setdefault(c["hour"], []).append({"cell": c, "comp": comp})
    out = []
    for (server, comp), by_hour in moved.items():
        runs: list[list[str]] = []
        for h in sorted(by_hour):
            if runs and _t(h) - _t(runs[-1][-1]) <= 3600:
                runs[-1].append(h)
            else:
                runs.append([h])
        for run in runs:
            hits = [x for h in run for x in by_hour[h]]
            ratios = [r for r in (_ratio(x["comp"]) for x in hits) if r is not None]
            models = sorted({x["cell"]["key"]["model"] for x in hits})
            unchanged = []
            for name in ("ttfb", "prefill", "decode"):
                if name == comp or (name == "decode" and comp in DECODE):
                    continue
                parts = [
                    y
                    for x in hits
                    for y in x["cell"]["components"]
                    if y["component"] == name or (name == "decode" and y["component"] in DECODE)
                ]
                rs = [_ratio(y) for y in parts]
                if parts and all(r is not None and abs(r - 1) < 0.25 for r in rs):
                    unchanged.append(name)
            start, end = _t(run[0]), _t(run[-1]) + 3600
            whole = len(run) > 1 and len(run) >= 0.8 * len(hours[server])
            ratio = sorted(ratios)[len(ratios) // 2] if ratios else None
            out.append(
                {
                    "component": comp,
                    "server_address": server,
                    "models": models,
                    "from": _iso(start),
                    "to": _iso(end),
                    "whole_window": whole,
                    "ratio": ratio,
                    "delta_ms": max(x["comp"]["delta_ms"] for x in hits),
                    "unchanged": unchanged,
                    "text": _finding_text(comp, q, ratio, start, end, whole, server, models, unchanged),
                }
            )
    out.sort(key=lambda f: -f["delta_ms"])
    return out


def _t(hour_iso: str) -> float:
    return datetime.fromisoformat(hour_iso.replace("Z", "+00:00")).timestamp()


def _finding_text(
    comp: str,
    q: str,
    ratio: float | None,
    start: float,
    end: float,
    whole: bool,
    server: str,
    models: list[str],
    unchanged: list[str],
) -> str:
    a, b = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
    when = (
        "across the window"
        if whole
        else f"at {a:%H:%M}–{b:%H:%M} UTC" + (f" ({a:%Y-%m-%d})" if (time.time() - start) > 86400 else "")
    )
    label = LABELS.get(comp, comp)
    measure = label if comp in DECODE else f"{label} {q}"
    times = f" ×{ratio:.2g}" if ratio is not None else ""
    text = f"{measure}{times} {when} on {server or '?'} ({', '.join(models)})"
    names = [LABELS.get(u, u) for u in unchanged]
    if names:
        text += ", " + " and ".join(names) + " unchanged"
    return text


def latency_text(res: dict[str, Any], top: int = 8) -> str:
    metric = "TTFT" if res["metric"] == "ttft" else "duration"
    w, b = res["window"], res["baseline"]
    base = "the window before" if b["spec"] == "previous" else f"the same window on {b['averaged_over']} previous days"
    if res["value_ms"] is None:
        return f"{metric} {res['quantile']}: not enough calls in [{w['from']}, {w['to']}) and {base} to compare"
    d = res["value_ms"] - res["baseline_ms"]
    ratio = res["value_ms"] / res["baseline_ms"] if res["baseline_ms"] else float("nan")
    lines = [
        f"{metric} {res['quantile']} {_ms(res['baseline_ms'])} → {_ms(res['value_ms'])} ({'+' if d >= 0 else '-'}"
        f"{_ms(abs(d))}, ×{ratio:.2g}) in [{w['from']}, {w['to']}) vs {base}"
    ]
    comps = sorted(res["components"], key=lambda c: -abs(c["delta_ms"]))
    if comps:
        lines.append(
            "around the "
            + res["quantile"]
            + ": "
            + ", ".join(
                f"{LABELS.get(c['component'], c['component'])} {c['delta_ms']:+.0f} ms"
                for c in comps
                if abs(c["delta_ms"]) >= 1
            )
        )
    for f in res["findings"][:top]:
        lines.append("slower: " + f["text"])
    if not res["findings"]:
        lines.append("no hour of the window shows a component ×1.5 its baseline")
    return "\n".join(lines)


__all__ = [
    "COST_DRIVERS",
    "LATENCY_COMPONENTS",
    "ExplainError",
    "Periods",
    "cost_text",
    "explain_cost",
    "explain_latency",
    "latency_text",
    "parse_end",
]
