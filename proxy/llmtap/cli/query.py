"""The read commands: ``sql``, ``report``, ``check-cost``.

Each reads exactly the store it is asked for (:meth:`StoreReader.source`): ``--admin`` asks that sidecar
(refused if it serves another store than an explicit ``--data-dir``/``--store``); otherwise the
sidecar running on ``--data-dir`` (it names its admin address in the data dir's lock, see
:mod:`llmtap.startup`) when it serves that store, else the store itself, opened read-only and
never created. A sidecar is asked with the install's token (``<data-dir>/admin-token``) unless
``--admin-token`` is given; the store itself is read through the same guarded read path
(:class:`llmtap.admin.Reads`). :class:`StoreReader` holds what a command was asked for and, once
found, where its queries go. Their SQL lives in :mod:`llmtap.admin.queries`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..admin.queries import cost_regression_sql, report_sql
from ..config import Environment
from ..durations import parse_duration
from ..startup import read_lock, store_id, store_identity
from ..store.clickhouse import failure_text
from ..store.readonly import QueryLimits
from .parser import DEFAULT_DATA_DIR, EXIT_NOTHING_TO_COMPARE, GROUP_CHOICES, Commands, addr, fail, number, threshold
from .terminal import one_line, safe_bytes


def register(commands: Commands) -> None:
    sql = commands.add("sql", cmd_sql, "read-only SQL on the store", commands.reading)
    sql.add_argument("query")
    commands.flag(sql, "--format", help="ClickHouse output format (JSONEachRow, CSV, ...)")

    rp = commands.add("report", cmd_report, "a terminal summary of calls, cost, latency and errors", commands.reading)
    rp.add_argument("--since", default="24h", help="time range back from now (e.g. 1h, 7d)")

    cc = commands.add("check-cost", cmd_check_cost, "exit 1 when cost regressed against its baseline", commands.reading)
    cc.add_argument("--window", default="1h", help="the window to check (e.g. 1h, 30m, 1d)")
    cc.add_argument("--baseline", default="7d", help="compare with the same window on each of these previous days")
    cc.add_argument("--threshold", type=threshold, default="20%", help="allowed increase (20%% or 0.2)")
    cc.add_argument("--by", default="model,feature", help="group by: " + ",".join(GROUP_CHOICES))
    cc.add_argument(
        "--metric",
        choices=("per_call", "total"),
        default="per_call",
        help="per_call: cost per call (robust to traffic volume, default); total: cost in the window",
    )
    cc.add_argument(
        "--min-samples",
        type=number("--min-samples", int, 1),
        default=20,
        help="calls needed in the window and in the baseline",
    )
    cc.add_argument("--service", default="", help="only this service")
    cc.add_argument(
        "--allow-empty",
        action="store_true",
        help=f"exit 0 when there is nothing to compare (default: exit {EXIT_NOTHING_TO_COMPARE})",
    )


@dataclass
class Source:
    """Where a read command's queries go: a sidecar's admin API, or the store itself."""

    admin: str | None = None
    store: str | None = None


@dataclass
class StoreReader:
    """The store a read command was asked for (``--admin``, ``--data-dir``, ``--store``, ``--read-store``,
    ``--admin-token``), and where its queries go: found once, on the first query (:meth:`source`)."""

    data_dir: str | None = None  # None: not given (the default data dir, which a sidecar may hold)
    store: str | None = None
    read_store: str = ""
    admin: str | None = None  # '': never ask a sidecar
    admin_token: str = ""
    limits: QueryLimits = field(default_factory=QueryLimits)
    _source: Source | None = field(default=None, init=False, repr=False)

    @classmethod
    def from_args(cls, args: argparse.Namespace, env: Environment) -> StoreReader:
        return cls(
            args.data_dir, args.store, args.read_store or "", args.admin, args.admin_token or "", env.query_limits
        )

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir or DEFAULT_DATA_DIR)

    def store_url(self) -> str:
        from ..store import default_store_url

        return str(self.store or default_store_url(self.data_path))

    def token(self) -> str:
        from ..admin import read_install_token

        return self.admin_token or read_install_token(self.data_path)

    def source(self) -> Source:
        if self._source is None:
            self._source = self._resolve()
        return self._source

    def _resolve(self) -> Source:
        from ..store.url import chdb_path

        wanted = self.store_url()
        asked = bool(self.store or self.data_dir)
        if self.admin == "":  # --admin '': never ask a sidecar
            return Source(store=wanted)
        if self.admin:
            h = healthz(self.admin)
            if h is None:
                fail(
                    f"--admin {self.admin}: no llmtap sidecar answers there "
                    "(start one, or drop --admin to read a store)"
                )
            if asked and h.get("store_id") not in (None, store_id(wanted)):
                fail(
                    f"--admin {self.admin}: that sidecar serves another store than the one asked for "
                    f"({'--store' if self.store else '--data-dir'}): drop one of the two"
                )
            return Source(admin=self.admin)
        data_dir = self.data_path
        dirs = [data_dir]
        if wanted.startswith("chdb://"):
            dirs.append(chdb_path(wanted).parent)
        for d in dirs:
            holder = read_lock(d)
            if holder is None or (self.store and holder.store_id != store_id(wanted)):
                continue
            if d != data_dir and holder.store_id != store_id(wanted):
                continue
            h = healthz(holder.admin_connect)
            if h is not None and h.get("store_id") == holder.store_id:
                return Source(admin=holder.admin_connect)
            if holder.store_id == store_id(wanted) and wanted.startswith("chdb://"):
                fail(
                    f"--data-dir {d}: the sidecar running on it (pid {holder.pid}) holds its store but does not "
                    f"answer on its admin address {holder.admin}: pass --admin HOST:PORT (and --admin-token if it "
                    "has one)"
                )
        if wanted.startswith("chdb://") and not (chdb_path(wanted) / "metadata").is_dir():
            where = f"--store {wanted}" if self.store else f"--data-dir {data_dir}"
            fail(
                f"{where}: no llmtap store there ({chdb_path(wanted)} does not exist or holds none): check the path "
                "(a sidecar creates it when it starts: llmtap run --data-dir DIR)"
            )
        return Source(store=wanted)

    def run(self, sql: str, fmt: str, params: dict[str, str] | None = None) -> bytes:
        """A read-only query on the store the command was asked for; failures are one-line usage errors."""
        from ..admin import QueryRefused, Reads
        from ..store import open_backend

        src = self.source()
        if src.admin is not None:
            payload: dict[str, object] = {"query": sql, "format": fmt}
            if params:
                payload["params"] = params
            res = _request(src.admin, "POST", "/api/sql", self.token(), json.dumps(payload).encode())
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
        backend = open_backend(src.store, read_url=self.read_store, for_reading=True, limits=self.limits)
        if backend is None:
            fail("--store none has nothing to query")
        try:
            return Reads(backend).run(sql, fmt, params)
        except QueryRefused as e:
            fail(f"refused: {e}")
        except Exception as e:
            fail(f"{store_identity(src.store)}: query failed: {failure_text(e)}")
        finally:
            backend.close()

    def rows(self, sql: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Rows of a read-only query (:meth:`run`)."""
        body = self.run(sql, "JSONEachRow", params)
        return [json.loads(line) for line in body.splitlines() if line.strip()]


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


def duration_s(text: str, what: str) -> int:
    try:
        return int(parse_duration(text))
    except ValueError as e:
        fail(f"{what}: {e}")


def cmd_sql(args: argparse.Namespace, env: Environment) -> int:
    tty = sys.stdout.isatty()
    fmt = args.format or ("PrettyCompact" if tty else "TSVWithNames")
    out = StoreReader.from_args(args, env).run(args.query, fmt)
    sys.stdout.buffer.write(safe_bytes(out) if tty else out)  # a terminal gets no control character
    return 0


def cmd_check_cost(args: argparse.Namespace, env: Environment) -> int:
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
    reader = StoreReader.from_args(args, env)
    rows = reader.rows(cost_regression_sql(window, days, by, args.min_samples, where, value), params)
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
        return _nothing_to_compare(args, reader, window, days, where, params)
    print(format_table(headers, table))
    if regressed:
        print(f"{len(regressed)} regression(s)", file=sys.stderr)
        return 1
    return 0


def _nothing_to_compare(
    args: argparse.Namespace, reader: StoreReader, window: int, days: int, where: str, params: dict[str, str] | None
) -> int:
    """No group had ``--min-samples`` calls in both periods: a gate must not pass on nothing."""
    totals = reader.rows(cost_regression_sql(window, days, (), 0, where, "ratio"), params)
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
    """A plain text table; every cell on one line, control characters escaped (:mod:`.terminal`)."""
    rows = [[one_line(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def cmd_report(args: argparse.Namespace, env: Environment) -> int:
    sql = report_sql(duration_s(args.since, "--since"))
    reader = StoreReader.from_args(args, env)
    total = reader.rows(sql["total"])[0]
    models = reader.rows(sql["models"])
    errs = reader.rows(sql["errors"])
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

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
        for r in rows:  # values as Text: no rich markup ([link=…]), no control character
            t.add_row(*(Text("-" if r[c] is None else one_line(str(r[c]))) for c in cols))
        console.print(t)

    show(f"llmtap: last {args.since}", [total])
    show("By model", models)
    show("Errors", errs)
    return 0
