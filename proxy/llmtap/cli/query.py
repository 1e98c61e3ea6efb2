"""The read commands: ``sql``, ``report``, ``check-cost``.

Each reads exactly the store it is asked for (:func:`resolve`): ``--admin`` asks that sidecar
(refused if it serves another store than an explicit ``--data-dir``/``--store``); otherwise the
sidecar running on ``--data-dir`` (it names its admin address in the data dir's lock, see
:mod:`llmtap.startup`) when it serves that store, else the store itself, opened read-only and
never created. A sidecar is asked with the install's token (``<data-dir>/admin-token``) unless
``--admin-token`` is given; the store itself is read through the same guarded read path
(:class:`llmtap.admin.Reads`). Their SQL lives in :mod:`llmtap.admin.queries`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..admin.queries import cost_regression_sql, report_sql
from ..durations import parse_duration
from ..startup import read_lock, store_id
from .parser import DEFAULT_DATA_DIR, EXIT_NOTHING_TO_COMPARE, GROUP_CHOICES, addr, fail


def store_url(args: argparse.Namespace) -> str:
    from ..store import default_store_url

    return str(args.store or default_store_url(Path(args.data_dir or DEFAULT_DATA_DIR)))


def admin_token(args: argparse.Namespace) -> str:
    from ..admin import read_install_token

    return str(args.admin_token or "") or read_install_token(Path(args.data_dir or DEFAULT_DATA_DIR))


@dataclass
class Source:
    """Where a read command's queries go: a sidecar's admin API, or the store itself."""

    admin: str | None = None
    store: str | None = None


def _request(admin: str, method: str, path: str, token: str, body: bytes | None = None) -> tuple[int, bytes] | None:
    host, port = addr(admin, "--admin")
    conn = http.client.HTTPConnection(host, port, timeout=30 if body else 3)
    try:
        headers = {"Content-Type": "application/json"} if body else {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except OSError:
        return None
    finally:
        conn.close()


def healthz(admin: str) -> dict[str, Any] | None:
    res = _request(admin, "GET", "/healthz", "")
    if res is None:
        return None
    try:
        h = json.loads(res[1])
    except ValueError:
        return None
    return h if isinstance(h, dict) else None


def resolve(args: argparse.Namespace) -> Source:
    cached: Source | None = getattr(args, "_source", None)
    if cached is not None:
        return cached
    src = _resolve(args)
    args._source = src
    return src


def _resolve(args: argparse.Namespace) -> Source:
    from ..store.url import chdb_path

    wanted = store_url(args)
    asked = bool(args.store or args.data_dir)
    if args.admin == "":  # --admin '': never ask a sidecar
        return Source(store=wanted)
    if args.admin:
        h = healthz(args.admin)
        if h is None:
            fail(f"--admin {args.admin}: no llmtap sidecar answers there (start one, or drop --admin to read a store)")
        if asked and h.get("store_id") not in (None, store_id(wanted)):
            fail(
                f"--admin {args.admin}: that sidecar serves another store than the one asked for "
                f"({'--store' if args.store else '--data-dir'}): drop one of the two"
            )
        return Source(admin=args.admin)
    data_dir = Path(args.data_dir or DEFAULT_DATA_DIR)
    dirs = [data_dir]
    if wanted.startswith("chdb://"):
        dirs.append(chdb_path(wanted).parent)
    for d in dirs:
        holder = read_lock(d)
        if holder is None or (args.store and holder.store_id != store_id(wanted)):
            continue
        if d != data_dir and holder.store_id != store_id(wanted):
            continue
        h = healthz(holder.admin_connect)
        if h is not None and h.get("store_id") == holder.store_id:
            return Source(admin=holder.admin_connect)
        if holder.store_id == store_id(wanted) and wanted.startswith("chdb://"):
            fail(
                f"--data-dir {d}: the sidecar running on it (pid {holder.pid}) holds its store but does not answer "
                f"on its admin address {holder.admin}: pass --admin HOST:PORT (and --admin-token if it has one)"
            )
    if wanted.startswith("chdb://") and not (chdb_path(wanted) / "metadata").is_dir():
        where = f"--store {wanted}" if args.store else f"--data-dir {data_dir}"
        fail(
            f"{where}: no llmtap store there ({chdb_path(wanted)} does not exist or holds none): check the path "
            "(a sidecar creates it when it starts: llmtap run --data-dir DIR)"
        )
    return Source(store=wanted)


def run_query(args: argparse.Namespace, sql: str, fmt: str, params: dict[str, str] | None = None) -> bytes:
    """A read-only query on the store the command was asked for; failures are one-line usage errors."""
    from ..admin import QueryRefused, Reads
    from ..store import StoreURLError, open_backend

    src = resolve(args)
    if src.admin is not None:
        payload: dict[str, object] = {"query": sql, "format": fmt}
        if params:
            payload["params"] = params
        res = _request(src.admin, "POST", "/api/sql", admin_token(args), json.dumps(payload).encode())
        if res is None:
            fail(f"--admin {src.admin}: the sidecar stopped answering")
        status, body = res
        if status == 401:
            fail(
                f"--admin {src.admin}: that sidecar wants its admin token: pass --admin-token TOKEN, or the "
                "sidecar's --data-dir (its admin-token file is read)"
            )
        if status != 200:
            fail(body.decode(errors="replace").strip())
        return body
    assert src.store is not None
    try:
        backend = open_backend(src.store, read_url=getattr(args, "read_store", None) or "", for_reading=True)
    except StoreURLError as e:
        fail(str(e))
    if backend is None:
        fail("--store none has nothing to query")
    try:
        return Reads(backend).run(sql, fmt, params)
    except QueryRefused as e:
        fail(f"refused: {e}")
    except Exception as e:
        text = str(e).strip()
        fail(f"query failed: {text.splitlines()[0] if text else type(e).__name__}")
    finally:
        backend.close()


def duration_s(text: str, what: str) -> int:
    try:
        return int(parse_duration(text))
    except ValueError as e:
        fail(f"{what}: {e}")


def cmd_sql(args: argparse.Namespace) -> int:
    fmt = args.format or ("PrettyCompact" if sys.stdout.isatty() else "TSVWithNames")
    sys.stdout.buffer.write(run_query(args, args.query, fmt))
    return 0


def query_rows(args: argparse.Namespace, sql: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Rows of a read-only query (:func:`run_query`)."""
    body = run_query(args, sql, "JSONEachRow", params)
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def cmd_check_cost(args: argparse.Namespace) -> int:
    window = duration_s(args.window, "--window")
    days = duration_s(args.baseline, "--baseline") // 86400
    if window < 1:
        fail("--window must be at least 1s")
    if days < 1:
        fail("--baseline must be at least 1d")
    threshold: float = args.threshold
    by = tuple(b.strip() for b in args.by.split(",") if b.strip())
    bad = [b for b in by if b not in GROUP_CHOICES]
    if bad:
        fail(f"--by takes {', '.join(GROUP_CHOICES)}; got {', '.join(bad)}")
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
    if not table:
        return _nothing_to_compare(args, window, days, where, params)
    print(format_table(headers, table))
    if regressed:
        print(f"{len(regressed)} regression(s)", file=sys.stderr)
        return 1
    return 0


def _nothing_to_compare(
    args: argparse.Namespace, window: int, days: int, where: str, params: dict[str, str] | None
) -> int:
    """No group had ``--min-samples`` calls in both periods: a gate must not pass on nothing."""
    totals = query_rows(args, cost_regression_sql(window, days, (), 0, where, "ratio"), params)
    cur = int(totals[0]["current_calls"]) if totals else 0
    base = int(totals[0]["baseline_calls"]) if totals else 0
    if not cur and not base:
        what = "no calls at all"
    elif not cur:
        what = "no data in the window"
    elif not base:
        what = "no baseline"
    else:
        what = "no group has enough calls in both periods"
    print(
        f"llmtap check-cost: nothing to compare ({what}): {cur} calls in the last {args.window}, {base} in the "
        f"baseline windows; each group needs --min-samples {args.min_samples} in both"
        + (" (passing: --allow-empty)" if args.allow_empty else "; --allow-empty passes this"),
        file=sys.stderr,
    )
    return 0 if args.allow_empty else EXIT_NOTHING_TO_COMPARE


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

    # On a terminal, its width; otherwise (a pipe, a file, CI logs) never cut: as wide as the rows need.
    console = Console() if sys.stdout.isatty() else Console(width=shutil.get_terminal_size((10_000, 24)).columns)

    def show(title: str, rows: list[dict[str, Any]]) -> None:
        if not rows:
            print(f"{title}: none")
            return
        cols = list(rows[0])
        t = Table(title=title)
        for c in cols:
            t.add_column(c, justify="right" if isinstance(rows[0][c], (int, float)) else "left", no_wrap=True)
        for r in rows:
            t.add_row(*("-" if r[c] is None else str(r[c]) for c in cols))
        console.print(t)

    show(f"llmtap: last {args.since}", [total])
    show("By model", models)
    show("Errors", errs)
    return 0
