"""The read commands: ``sql``, ``report``, ``check-cost``.

Each asks a running sidecar's admin API when one answers (``--admin``), with the install's token
(``<data-dir>/admin-token``) unless ``--admin-token`` is given, else opens the store itself
(``--data-dir`` / ``--store``) and runs the query through the same guarded read path
(:class:`llmtap.admin.Reads`). Their SQL lives in :mod:`llmtap.admin.queries`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
from pathlib import Path
from typing import Any

from ..admin.queries import cost_regression_sql, report_sql
from ..durations import parse_duration
from .parser import GROUP_CHOICES, addr


def store_url(args: argparse.Namespace) -> str:
    from ..store import default_store_url

    return args.store or default_store_url(Path(args.data_dir))


def admin_token(args: argparse.Namespace) -> str:
    from ..admin import read_install_token

    return str(args.admin_token or "") or read_install_token(Path(args.data_dir))


def post_sql(
    admin: str, token: str, query: str, fmt: str, params: dict[str, str] | None = None
) -> tuple[int, bytes] | None:
    host, port = addr(admin, "--admin")
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        payload: dict[str, object] = {"query": query, "format": fmt}
        if params:
            payload["params"] = params
        conn.request("POST", "/api/sql", body=json.dumps(payload), headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (ConnectionRefusedError, OSError):
        return None
    finally:
        conn.close()


def duration_s(text: str, what: str) -> int:
    try:
        return int(parse_duration(text))
    except ValueError as e:
        raise SystemExit(f"llmtap: {what}: {e}") from None


def _store_read(args: argparse.Namespace, sql: str, fmt: str, params: dict[str, str] | None = None) -> bytes:
    """The query through the guarded read path of the store itself (no sidecar answering)."""
    from ..admin import Reads
    from ..store import StoreURLError, open_backend

    try:
        backend = open_backend(store_url(args), read_url=getattr(args, "read_store", None) or "", reads_only=True)
        if backend is None:
            raise StoreURLError("--store none has nothing to query")
    except StoreURLError as e:
        raise SystemExit(f"llmtap: {e}") from None
    try:
        return Reads(backend).run(sql, fmt, params)
    finally:
        backend.close()


def run_query(args: argparse.Namespace, sql: str, fmt: str, params: dict[str, str] | None = None) -> bytes:
    """Through a running sidecar's admin API when one answers, else from the store; exits on a refusal."""
    from ..admin import QueryRefused

    res = post_sql(args.admin, admin_token(args), sql, fmt, params) if args.admin else None
    if res is not None:
        status, body = res
        if status != 200:
            raise SystemExit(f"llmtap: {body.decode(errors='replace').strip()}")
        return body
    try:
        return _store_read(args, sql, fmt, params)
    except QueryRefused as e:
        raise SystemExit(f"llmtap: refused: {e}") from None
    except SystemExit:
        raise
    except Exception as e:
        raise SystemExit(f"llmtap: query failed: {str(e).strip().splitlines()[0] if str(e).strip() else e}") from None


def cmd_sql(args: argparse.Namespace) -> int:
    fmt = args.format or ("PrettyCompact" if sys.stdout.isatty() else "TSVWithNames")
    try:
        sys.stdout.buffer.write(run_query(args, args.query, fmt))
    except SystemExit as e:
        print(str(e.code), file=sys.stderr)
        return 2
    return 0


def query_rows(args: argparse.Namespace, sql: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Rows of a read-only query: through a running sidecar's admin API, else from the store."""
    body = run_query(args, sql, "JSONEachRow", params)
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def cmd_check_cost(args: argparse.Namespace) -> int:
    window = duration_s(args.window, "--window")
    days = duration_s(args.baseline, "--baseline") // 86400
    if days < 1:
        raise SystemExit("llmtap: --baseline must be at least 1d")
    t = args.threshold.strip()
    threshold = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    by = tuple(b.strip() for b in args.by.split(",") if b.strip())
    bad = [b for b in by if b not in GROUP_CHOICES]
    if bad:
        raise SystemExit(f"llmtap: --by takes {', '.join(GROUP_CHOICES)}; got {', '.join(bad)}")
    where, params = "1=1", None
    if args.service:
        where, params = "service = {service:String}", {"service": args.service}
    value = "per_call_ratio" if args.metric == "per_call" else "ratio"
    rows = query_rows(args, cost_regression_sql(window, days, by, args.min_samples, where, value), params)
    limit = 1 + threshold
    regressed = [r for r in rows if r["value"] is not None and r["value"] > limit]
    headers = [*by, "current_usd", "baseline_usd", "current_calls", "baseline_calls", "ratio", "per_call_ratio", ""]
    table = [
        [
            *(str(r[b]) for b in by),
            f"{r['current_cost']:.4f}",
            f"{r['baseline_cost']:.4f}",
            str(r["current_calls"]),
            str(r["baseline_calls"]),
            "-" if r["ratio"] is None else f"{r['ratio']:.2f}",
            "-" if r["per_call_ratio"] is None else f"{r['per_call_ratio']:.2f}",
            "REGRESSION" if r in regressed else "",
        ]
        for r in rows
    ]
    print(
        f"cost {'per call' if args.metric == 'per_call' else 'per window'}: last {args.window} vs the same "
        f"window on each of the previous {days} days; threshold +{threshold:.0%}; min {args.min_samples} calls"
    )
    print(format_table(headers, table) if table else "(no group has enough calls in both periods)")
    if regressed:
        print(f"{len(regressed)} regression(s)", file=sys.stderr)
        return 1
    return 0


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def cmd_report(args: argparse.Namespace) -> int:
    sql = report_sql(duration_s(args.since, "--since"))
    total = query_rows(args, sql["total"])[0]
    models = query_rows(args, sql["models"])
    errs = query_rows(args, sql["errors"])
    from rich.console import Console
    from rich.table import Table

    def show(title: str, rows: list[dict[str, Any]]) -> None:
        if not rows:
            print(f"{title}: none")
            return
        cols = list(rows[0])
        t = Table(title=title)
        for c in cols:
            t.add_column(c, justify="right" if isinstance(rows[0][c], (int, float)) else "left")
        for r in rows:
            t.add_row(*("-" if r[c] is None else str(r[c]) for c in cols))
        Console().print(t)

    show(f"llmtap: last {args.since}", [total])
    show("By model", models)
    show("Errors", errs)
    return 0
