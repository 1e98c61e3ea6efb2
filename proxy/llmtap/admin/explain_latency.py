"""``explain-latency``: the one SQL (:mod:`.latency_sql`), its rows as JSON, and the sentences that name what
got slower ("TTFB p95 ×3 at 17:00–18:00 UTC on api.openai.com, decode unchanged"). Used by the CLI and the
viewer; every number comes from the SQL's rows."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from .explain import ExplainError, Periods, RowsFn, iso, num
from .latency_sql import LATENCY_COMPONENTS, explain_latency_sql

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
            c.update(before_ms=num(r["before_ms"]), after_ms=num(r["after_ms"]), band_delta_ms=r["delta_ms"])
        else:
            c["components"].append(
                {
                    "component": r["component"],
                    "delta_ms": r["delta_ms"],
                    "before_ms": num(r["before_ms"]),
                    "after_ms": num(r["after_ms"]),
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
                    "from": iso(start),
                    "to": iso(end),
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


__all__ = ["LABELS", "LATENCY_COMPONENTS", "explain_latency", "findings", "latency_text"]
