"""``llmtap reconcile``: what llmtap tracked against what the provider billed, per day and model.

The billed side is the provider's own cost report, read from a file (``--costs``: the JSON the API
returns, one page or a list of pages) or fetched with an admin key (``--admin-key-file FILE`` or
``LLMTAP_ADMIN_KEY``, every page; ``--admin-key KEY`` works too, but ``ps`` shows it):

- OpenAI ``GET /v1/organization/costs`` (``bucket_width=1d``, ``group_by=line_item``): pages
  ``{"object": "page", "data": [bucket], "has_more", "next_page"}``, each bucket ``{"start_time",
  "end_time", "results": [{"object": "organization.costs.result", "amount": {"value",
  "currency"}, "line_item", "project_id"}]}``. A line item reads ``"<model>, <kind>"`` (``input``,
  ``cached input``, ``output``, …); ungrouped results (``line_item: null``) count for the day as a whole.
- Anthropic ``GET /v1/organizations/cost_report`` (``group_by[]=description``): pages ``{"data":
  [{"starting_at", "ending_at", "results": [{"amount" (cents, a decimal string), "currency",
  "cost_type", "model", "service_tier", "token_type", …}]}], "has_more", "next_page"}``.

The tracked side is ``llm_calls`` (the cost llmtap computed, billing ``subscription`` left out: a plan
is not billed per token), read like ``sql`` and ``check-cost`` do (a running sidecar's admin API, else
the store). Models are matched without their date suffix (``gpt-4o-2024-08-06`` is ``gpt-4o``).
The capture rate is tracked ÷ billed; exit 1 when the total is below ``--min-capture``, 3 when the
report has no billed cost to compare with, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..admin.queries import tracked_cost_sql
from ..config import Environment
from ..errors import LlmtapError
from ..options import env_name
from .parser import Commands
from .query import StoreReader, duration_s, format_table

ADMIN_KEY_VAR = env_name("--admin-key")  # the key from the environment: not on a command line ps shows

ALL = "(all models)"
NO_DATA = 3
PROVIDERS: dict[str, tuple[str, ...]] = {"openai": ("openai",), "anthropic": ("anthropic",)}
URLS = {
    "openai": "https://api.openai.com/v1/organization/costs",
    "anthropic": "https://api.anthropic.com/v1/organizations/cost_report",
}
_DATED = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")


class ReportError(LlmtapError, ValueError):
    """The cost report is not one of the shapes llmtap reads."""


def model_key(model: str) -> str:
    return _DATED.sub("", model.strip().lower()) if model else ALL


@dataclass
class Billed:
    """Billed USD per (UTC day, model key), and the time range the report covers."""

    usd: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    start: float = float("inf")
    end: float = 0.0

    def add(self, start: float, end: float, model: str, usd: float) -> None:
        day = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d")
        self.usd[(day, model_key(model))] += usd
        self.start, self.end = min(self.start, start), max(self.end, end)


def _ts(v: Any) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise ReportError(f"a bucket time is not a timestamp: {v!r}")


def _pages(doc: Any) -> list[dict[str, Any]]:
    pages = doc if isinstance(doc, list) else [doc]
    if not pages or not all(isinstance(p, dict) and isinstance(p.get("data"), list) for p in pages):
        raise ReportError('expected a cost report page ({"data": [buckets…]}) or a list of pages')
    return pages


def parse_openai(doc: Any, into: Billed | None = None) -> Billed:
    billed = into or Billed()
    for page in _pages(doc):
        for bucket in page["data"]:
            start, end = _ts(bucket.get("start_time")), _ts(bucket.get("end_time"))
            for r in bucket.get("results") or []:
                amount = r.get("amount") or {}
                if str(amount.get("currency", "usd")).lower() != "usd":
                    raise ReportError(f"only USD costs are compared; got {amount.get('currency')!r}")
                item = r.get("line_item") or ""
                billed.add(start, end, item.rsplit(",", 1)[0] if "," in item else item, float(amount.get("value") or 0))
    return billed


def parse_anthropic(doc: Any, into: Billed | None = None) -> Billed:
    billed = into or Billed()
    for page in _pages(doc):
        for bucket in page["data"]:
            start, end = _ts(bucket.get("starting_at")), _ts(bucket.get("ending_at"))
            for r in bucket.get("results") or []:
                if str(r.get("currency") or "USD").upper() != "USD":
                    raise ReportError(f"only USD costs are compared; got {r.get('currency')!r}")
                billed.add(start, end, r.get("model") or "", float(r.get("amount") or 0) / 100.0)  # cents
    return billed


PARSERS = {"openai": parse_openai, "anthropic": parse_anthropic}


def fetch(provider: str, key: str, since_s: int, base: str = "") -> list[dict[str, Any]]:
    """Every page of the provider's cost report over the last ``since_s`` seconds (daily buckets)."""
    now = datetime.now(UTC).timestamp()
    start = int((now - since_s) // 86400 * 86400)
    if provider == "openai":
        params: list[tuple[str, str]] = [("start_time", str(start)), ("bucket_width", "1d"), ("limit", "31")]
        params.append(("group_by", "line_item"))
        headers = {"Authorization": f"Bearer {key}"}
    else:
        iso = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        params = [("starting_at", iso), ("bucket_width", "1d"), ("limit", "31"), ("group_by[]", "description")]
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    url, pages, page = base or URLS[provider], [], ""
    for _ in range(1000):  # a runaway cursor stops here
        q = urllib.parse.urlencode([*params, *([("page", page)] if page else [])])
        req = urllib.request.Request(f"{url}?{q}", headers={**headers, "User-Agent": "llmtap-reconcile"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                doc = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise ReportError(f"{url} answered {e.code}: {e.read()[:300].decode(errors='replace')}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise ReportError(f"cannot fetch {url}: {e}") from None
        pages.append(doc)
        page = str(doc.get("next_page") or "") if isinstance(doc, dict) and doc.get("has_more") else ""
        if not page:
            break
    return pages


def compare(billed: Billed, tracked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per day and model: tracked vs billed. A day billed as a whole (no model) is compared
    with everything tracked that day."""
    whole_days = {day for day, model in billed.usd if model == ALL}
    track: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in tracked:
        key = (r["day"], ALL if r["day"] in whole_days else model_key(r["model"]))
        track[key][0] += float(r["tracked_usd"] or 0)
        track[key][1] += int(r["calls"])
    rows = []
    for key in sorted(set(billed.usd) | set(track)):
        b = billed.usd.get(key, 0.0)
        t, calls = track.get(key, [0.0, 0.0])
        rows.append(
            {
                "day": key[0],
                "model": key[1],
                "calls": int(calls),
                "tracked_usd": t,
                "billed_usd": b,
                "capture": (t / b) if b > 0 else None,
            }
        )
    return rows


def cmd_reconcile(args: argparse.Namespace, env: Environment) -> int:
    since = duration_s(args.since, "--since")
    # A ReportError (an llmtap error: the report cannot be read) is one line and exit 2, in main.
    if args.costs:
        try:
            doc = json.loads(Path(args.costs).read_text())
        except (OSError, ValueError) as e:
            raise ReportError(f"cannot read {args.costs}: {e}") from None
        billed = PARSERS[args.provider](doc)
    elif key := admin_key(args, env):
        billed = PARSERS[args.provider](fetch(args.provider, key, since, args.costs_url))
    else:
        raise ReportError(
            f"give the cost report: --costs FILE, or an admin key to fetch it (--admin-key-file FILE or "
            f"{ADMIN_KEY_VAR})"
        )
    if not billed.usd:
        print(f"llmtap reconcile: the {args.provider} cost report has no costs in it", file=sys.stderr)
        return NO_DATA
    tracked = StoreReader.from_args(args, env).rows(
        tracked_cost_sql(PROVIDERS[args.provider], billed.start, billed.end)
    )
    rows = compare(billed, tracked)
    total_b = sum(r["billed_usd"] for r in rows)
    total_t = sum(r["tracked_usd"] for r in rows)
    if args.format == "json":
        print(
            json.dumps(
                {
                    "provider": args.provider,
                    "rows": rows,
                    "tracked_usd": total_t,
                    "billed_usd": total_b,
                    "capture": total_t / total_b if total_b > 0 else None,
                }
            )
        )
    else:
        table = [
            [
                r["day"],
                r["model"],
                str(r["calls"]),
                f"{r['tracked_usd']:.4f}",
                f"{r['billed_usd']:.4f}",
                "-" if r["capture"] is None else f"{r['capture']:.0%}",
            ]
            for r in rows
        ]
        print(f"{args.provider}: tracked by llmtap vs billed, per UTC day and model")
        print(format_table(["day", "model", "calls", "tracked_usd", "billed_usd", "capture"], table))
        rate = f"{total_t / total_b:.1%}" if total_b > 0 else "-"
        print(f"total: tracked {total_t:.4f} USD, billed {total_b:.4f} USD, capture {rate}")
    if total_b <= 0:
        print("llmtap reconcile: nothing billed to compare with", file=sys.stderr)
        return NO_DATA
    if total_t / total_b < args.min_capture:
        print(
            f"llmtap reconcile: capture {total_t / total_b:.1%} is below --min-capture {args.min_capture:.0%}: "
            "traffic that does not pass through llmtap, or stale prices",
            file=sys.stderr,
        )
        return 1
    return 0


def admin_key(args: argparse.Namespace, env: Environment) -> str:
    """The provider admin key: from ``--admin-key-file`` or ``LLMTAP_ADMIN_KEY`` (``--admin-key KEY`` works, with a
    warning: every local user sees a command line in ``ps``)."""
    if args.admin_key_file:
        try:
            return Path(args.admin_key_file).read_text().strip()
        except OSError as e:
            raise ReportError(f"--admin-key-file {args.admin_key_file}: cannot read it ({e.strerror})") from None
    key = str(args.admin_key or "")
    if key and key != env.get(ADMIN_KEY_VAR, ""):
        print(
            "llmtap reconcile: --admin-key on the command line is visible to every local user (ps): "
            f"use --admin-key-file FILE or {ADMIN_KEY_VAR}",
            file=sys.stderr,
        )
    return key


def register(commands: Commands) -> None:
    p = commands.add(
        "reconcile",
        cmd_reconcile,
        "tracked cost vs the provider's cost report, per day and model (exit 1 below --min-capture)",
        commands.reading,
    )
    provider = commands.flag(p, "--provider", choices=tuple(PROVIDERS))
    provider.required = not provider.default
    commands.flag(p, "--costs", "", metavar="FILE", help="the provider's cost report (JSON: a page or pages)")
    commands.flag(
        p,
        "--admin-key-file",
        "",
        metavar="FILE",
        help=f"fetch the cost report with the admin key in FILE (every page); or ${ADMIN_KEY_VAR}",
    )
    commands.flag(p, "--admin-key", "", help="the admin key itself (visible in ps: prefer the file or the variable)")
    commands.flag(p, "--costs-url", "", help=argparse.SUPPRESS)  # another endpoint (a gateway)
    commands.flag(p, "--since", "30d", help="with an admin key: how far back to fetch (e.g. 30d)")
    commands.flag(p, "--min-capture", 0.9, type=float, help="exit 1 when tracked/billed is below")
    p.add_argument("--format", choices=("text", "json"), default="text")
