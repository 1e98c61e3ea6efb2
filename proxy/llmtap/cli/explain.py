"""``llmtap explain-cost`` and ``llmtap explain-latency``: the analyses of :mod:`llmtap.admin.explain`, read
like ``sql`` (a running sidecar's admin API when one answers, else the store), printed as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..admin.explain import Periods, RowsFn, cost_text, explain_cost, parse_end
from ..admin.explain_latency import explain_latency, latency_text
from ..config import Environment
from ..errors import LlmtapError, UsageError
from .parser import GROUP_CHOICES, Commands
from .query import StoreReader
from .terminal import escape


def _periods(args: argparse.Namespace) -> Periods:
    return Periods.parse(args.window, args.baseline, parse_end(args.end))  # an ExplainError is one line in main


def _rows(reader: StoreReader) -> RowsFn:
    def rows(sql: str) -> list[dict[str, Any]]:
        try:
            return reader.rows(sql)
        except LlmtapError:  # already one line that says what to do
            raise
        except Exception as e:  # the store's own error, on one line
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UsageError(f"query failed: {first}") from None

    return rows


def _emit(res: dict[str, object], fmt: str, text: str) -> None:
    if fmt == "json":
        json.dump(res, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(escape(text))  # keys are stored values: no control character reaches the terminal


def cmd_explain_cost(args: argparse.Namespace, env: Environment) -> int:
    by = [b.strip() for b in args.by.split(",") if b.strip()]
    bad = [b for b in by if b not in GROUP_CHOICES]
    if bad or not by:
        raise UsageError(f"--by takes one or more of {', '.join(GROUP_CHOICES)}; got {args.by!r}")
    periods = _periods(args)
    res = explain_cost(_rows(StoreReader.from_args(args, env)), periods, by)
    _emit(res, args.format, cost_text(res, top=args.top))
    return 0


def quantile(text: str) -> float:
    t = text.strip().lower().removeprefix("p")
    try:
        v = float(t)
    except ValueError:
        raise UsageError(f"--quantile takes p50, p90, p95 or 0.95; got {text!r}") from None
    q = v / 100 if v > 1 else v
    if not 0.06 <= q <= 0.95:
        raise UsageError("--quantile must be between p6 and p95 (the band around it needs room above)")
    return q


def cmd_explain_latency(args: argparse.Namespace, env: Environment) -> int:
    periods = _periods(args)
    q = quantile(args.quantile)
    res = explain_latency(_rows(StoreReader.from_args(args, env)), periods, args.metric, q)
    _emit(res, args.format, latency_text(res))
    return 0


def register(commands: Commands) -> None:
    ec = commands.add(
        "explain-cost",
        cmd_explain_cost,
        "why cost changed: an exact split of the change into drivers (volume, mix, tokens, cache, price, …)",
        commands.reading,
    )
    _window_flags(ec)
    ec.add_argument("--by", default="model,feature", help="key dimensions: " + ",".join(GROUP_CHOICES))
    ec.add_argument("--top", type=int, default=12, help="drivers in the text table (json lists all)")
    el = commands.add(
        "explain-latency",
        cmd_explain_latency,
        "why it is slow: the change of a latency quantile split into TTFB, prefill, decode, retries, waits",
        commands.reading,
    )
    _window_flags(el)
    el.add_argument("--metric", choices=("duration", "ttft"), default="duration", help="duration (default) or ttft")
    el.add_argument("--quantile", default="p95", help="p50, p90, p95 (default)")


def _window_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", default="24h", help="the window: [end - W, end) (default 24h)")
    p.add_argument(
        "--baseline",
        default="7d",
        help="previous (the window before) or Nd: the same window on each of the N previous days, averaged (7d)",
    )
    p.add_argument("--end", default=None, help="end of the window: unix seconds or ISO time (default now)")
    p.add_argument("--format", choices=("text", "json"), default="text")
