"""The ``llmtap`` command line. Every flag also reads ``LLMTAP_<FLAG>`` from the environment."""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from . import __version__, demo, synthetic
from .providers import parse_host_port

DEFAULT_LISTEN = "127.0.0.1:8080"
DEFAULT_ADMIN = "127.0.0.1:9464"
DEFAULT_DATA_DIR = "./llmtap-data"
GROUP_CHOICES = ("model", "feature", "provider", "service", "user", "key", "tenant")


def _env(flag: str, default: Any = None) -> Any:
    return os.environ.get("LLMTAP_" + flag.upper().replace("-", "_"), default)


def _env_list(flag: str) -> list[str]:
    v = _env(flag, "")
    return [x.strip() for x in v.split(",") if x.strip()] if v else []


def _env_bool(flag: str) -> bool:
    return str(_env(flag, "")).lower() in ("1", "true", "yes", "on")


def _addr(spec: str, what: str) -> tuple[str, int]:
    try:
        host, port = parse_host_port(spec)
    except ValueError as e:
        raise SystemExit(f"llmtap: invalid {what} {spec!r}: {e}") from None
    if port is None:
        raise SystemExit(f"llmtap: {what} needs HOST:PORT, got {spec!r}")
    return host, port


def _connect_to(specs: list[str]) -> dict[tuple[str, int], tuple[str, int]]:
    out: dict[tuple[str, int], tuple[str, int]] = {}
    for spec in specs:
        parts = spec.split(":")
        if len(parts) != 4 or not parts[1].isdigit() or not parts[3].isdigit():
            raise SystemExit(f"llmtap: --connect-to takes HOST:PORT:ADDR:PORT, got {spec!r}")
        out[(parts[0].lower(), int(parts[1]))] = (parts[2], int(parts[3]))
    return out


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        default=_env("data-dir", DEFAULT_DATA_DIR),
        help="CA, embedded store, spool (default ./llmtap-data)",
    )
    p.add_argument(
        "--store",
        default=_env("store"),
        help="chdb://PATH (default chdb://<data-dir>/store) or clickhouse://user:pass@host:8123/db",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="llmtap", description="Observability sidecar for LLM API traffic.")
    p.add_argument("--version", action="version", version=f"llmtap {__version__}")
    logp = argparse.ArgumentParser(add_help=False)
    logp.add_argument("--log-level", default=_env("log-level", "INFO"))
    logp.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=_env("log-format", "text"),
        help="json: one JSON object per line, including one 'llm call' line per call",
    )
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", parents=[logp], help="run the sidecar proxy")
    run.add_argument("--listen", default=_env("listen", DEFAULT_LISTEN), help="proxy address HOST:PORT")
    run.add_argument("--admin", default=_env("admin", DEFAULT_ADMIN), help="admin HTTP address HOST:PORT")
    _common(run)
    run.add_argument(
        "--intercept",
        action="append",
        default=_env_list("intercept"),
        metavar="HOST[:PORT]",
        help="also intercept this host (repeatable; env: comma-separated)",
    )
    run.add_argument("--upstream-ca", default=_env("upstream-ca"), help="extra CA bundle for upstream TLS")
    run.add_argument(
        "--otlp-endpoint",
        default=_env("otlp-endpoint", os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")),
        help="OTLP endpoint for spans",
    )
    run.add_argument(
        "--capture-content",
        action="store_true",
        default=_env_bool("capture-content"),
        help="opt-in prompt/response capture (redacted, size-capped)",
    )
    run.add_argument(
        "--service",
        default=_env("service", os.environ.get("OTEL_SERVICE_NAME", "")),
        help="service name for calls without x-llmtap-service (default $OTEL_SERVICE_NAME)",
    )
    run.add_argument(
        "--connect-to",
        action="append",
        default=_env_list("connect-to"),
        metavar="HOST:PORT:ADDR:PORT",
        help="connect to ADDR:PORT for HOST:PORT (TLS name unchanged), as curl --connect-to",
    )
    run.add_argument("--proxy-auth", default=_env("proxy-auth", ""), help="USER:PASS required from clients")
    run.add_argument(
        "--allow-open-proxy",
        action="store_true",
        default=_env_bool("allow-open-proxy"),
        help="allow a non-loopback --listen without --proxy-auth",
    )
    run.add_argument("--admin-token", default=_env("admin-token", ""), help="bearer token for the admin API")
    run.add_argument(
        "--admin-token-file",
        default=_env("admin-token-file", ""),
        help="read the admin bearer token from this file (e.g. a container secret)",
    )
    run.add_argument(
        "--spool-max-mb",
        type=int,
        default=int(_env("spool-max-mb", 1024)),
        help="bound of the on-disk spool (records waiting for the store), default 1024",
    )
    run.add_argument("--prices", default=_env("prices"), help="price file (JSON/TOML) overriding genai-prices")
    run.add_argument(
        "--content-retention-days",
        type=int,
        default=int(_env("content-retention-days", 7)),
        help="days captured content is kept (llm_content TTL), default 7",
    )
    run.add_argument(
        "--traces-retention-days",
        type=int,
        default=int(_env("traces-retention-days", 0)),
        help="days otel_traces rows are kept, 0 = forever (default)",
    )
    run.add_argument(
        "--calls-retention-days",
        type=int,
        default=int(_env("calls-retention-days", 0)),
        help="days llm_calls rows are kept, 0 = forever (default)",
    )

    sql = sub.add_parser("sql", parents=[logp], help="read-only SQL on the store")
    sql.add_argument("query")
    sql.add_argument("--format", default=_env("format"), help="ClickHouse output format (JSONEachRow, CSV, ...)")
    sql.add_argument("--admin", default=_env("admin", DEFAULT_ADMIN), help="a running sidecar's admin address")
    sql.add_argument("--admin-token", default=_env("admin-token", ""))
    _common(sql)

    sch = sub.add_parser("schema", parents=[logp], help="print (or apply) the ClickHouse schema")
    sch.add_argument("--db", default=_env("db", "llmtap"), help="database name (default llmtap)")
    sch.add_argument(
        "--cluster", default=_env("cluster", ""), help="emit the ON CLUSTER / Replicated / Distributed form"
    )
    sch.add_argument("--apply", action="store_true", help="run it against --store (a clickhouse:// URL)")
    sch.add_argument("--store", default=_env("store"), help="clickhouse://user:pass@host:8123/db for --apply")

    cc = sub.add_parser("check-cost", parents=[logp], help="exit 1 when cost regressed against its baseline")
    cc.add_argument("--window", default="1h", help="the window to check (e.g. 1h, 30m, 1d)")
    cc.add_argument("--baseline", default="7d", help="compare with the same window on each of these previous days")
    cc.add_argument("--threshold", default="20%", help="allowed increase (20%% or 0.2)")
    cc.add_argument("--by", default="model,feature", help="group by: " + ",".join(GROUP_CHOICES))
    cc.add_argument(
        "--metric",
        choices=("per_call", "total"),
        default="per_call",
        help="per_call: cost per call (robust to traffic volume, default); total: cost in the window",
    )
    cc.add_argument("--min-samples", type=int, default=20, help="calls needed in the window and in the baseline")
    cc.add_argument("--service", default="", help="only this service")
    cc.add_argument("--admin", default=_env("admin", DEFAULT_ADMIN))
    cc.add_argument("--admin-token", default=_env("admin-token", ""))
    _common(cc)

    rp = sub.add_parser("report", parents=[logp], help="a terminal summary of calls, cost, latency and errors")
    rp.add_argument("--since", default="24h", help="time range back from now (e.g. 1h, 7d)")
    rp.add_argument("--admin", default=_env("admin", DEFAULT_ADMIN))
    rp.add_argument("--admin-token", default=_env("admin-token", ""))
    _common(rp)

    dm = sub.add_parser("demo", parents=[logp], help="mock provider + sidecar + live traffic: filled dashboards")
    demo.add_arguments(dm)

    seed = sub.add_parser("seed", parents=[logp], help="fill a store with synthetic history (demo, dashboards)")
    synthetic.add_arguments(seed)

    ca = sub.add_parser("ca", parents=[logp], help="print the CA certificate path")
    ca.add_argument("--data-dir", default=_env("data-dir", DEFAULT_DATA_DIR))

    env = sub.add_parser("env", parents=[logp], help="print the shell exports a client needs")
    env.add_argument("--data-dir", default=_env("data-dir", DEFAULT_DATA_DIR))
    env.add_argument("--listen", default=_env("listen", DEFAULT_LISTEN))

    mock = sub.add_parser("mock-provider", parents=[logp], help="a local HTTPS server replaying realistic LLM streams")
    mock.add_argument("--listen", default=_env("mock-listen", "127.0.0.1:0"))
    mock.add_argument("--cert-dir", default=_env("mock-cert-dir", "./llmtap-mock"))
    return p


def _store_url(args: argparse.Namespace) -> str:
    from .store.open import default_store_url

    return args.store or default_store_url(Path(args.data_dir))


def _token(token: str, path: str) -> str:
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as e:
            raise SystemExit(f"llmtap: cannot read --admin-token-file: {e}") from None
    return token


def cmd_run(args: argparse.Namespace) -> int:
    from .pricing import PriceFileError
    from .sidecar import ConfigError, RunConfig, run
    from .store.open import StoreURLError

    cfg = RunConfig(
        listen=_addr(args.listen, "--listen"),
        admin=_addr(args.admin, "--admin"),
        data_dir=Path(args.data_dir).resolve(),
        store=_store_url(args),
        intercept=list(args.intercept),
        upstream_ca=Path(args.upstream_ca) if args.upstream_ca else None,
        connect_to=_connect_to(args.connect_to),
        service=args.service,
        proxy_auth=args.proxy_auth,
        allow_open_proxy=args.allow_open_proxy,
        admin_token=_token(args.admin_token, args.admin_token_file),
        otlp_endpoint=args.otlp_endpoint or "",
        capture_content=args.capture_content,
        prices=Path(args.prices) if args.prices else None,
        content_retention_days=args.content_retention_days,
        traces_retention_days=args.traces_retention_days,
        calls_retention_days=args.calls_retention_days,
        spool_max_mb=args.spool_max_mb,
    )
    for spec in cfg.intercept:
        try:
            parse_host_port(spec)
        except ValueError as e:
            raise SystemExit(f"llmtap: invalid --intercept {spec!r}: {e}") from None
    try:
        return run(cfg)
    except (ConfigError, StoreURLError, FileNotFoundError, PriceFileError) as e:
        print(f"llmtap: {e}", file=sys.stderr)
        return 2


def _post_sql(admin: str, token: str, query: str, fmt: str) -> tuple[int, bytes] | None:
    host, port = _addr(admin, "--admin")
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request("POST", "/api/sql", body=json.dumps({"query": query, "format": fmt}), headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (ConnectionRefusedError, OSError):
        return None
    finally:
        conn.close()


def cmd_sql(args: argparse.Namespace) -> int:
    from .admin import run_sql
    from .sqlguard import ReadOnlyViolation

    fmt = args.format or ("PrettyCompact" if sys.stdout.isatty() else "TSVWithNames")
    res = _post_sql(args.admin, args.admin_token, args.query, fmt) if args.admin else None
    if res is not None:
        status, body = res
        if status != 200:
            sys.stderr.write(f"llmtap: {body.decode(errors='replace').strip()}\n")
            return 2
        sys.stdout.buffer.write(body)
        return 0
    from .store.open import StoreURLError, open_backend

    try:
        backend = open_backend(_store_url(args))
        if backend is None:
            raise StoreURLError("--store none has nothing to query")
    except StoreURLError as e:
        print(f"llmtap: {e}", file=sys.stderr)
        return 2
    try:
        sys.stdout.buffer.write(run_sql(backend.query, args.query, fmt))
    except ReadOnlyViolation as e:
        print(f"llmtap: refused: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        print(f"llmtap: query failed: {e}", file=sys.stderr)
        return 2
    finally:
        backend.close()
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from .store import cluster_statements, schema_statements

    try:
        stmts = cluster_statements(args.db, args.cluster) if args.cluster else schema_statements(args.db)
    except ValueError as e:
        print(f"llmtap: {e}", file=sys.stderr)
        return 2
    if not args.apply:
        print(";\n\n".join(stmts) + ";")
        return 0
    if not args.store or not args.store.startswith(("clickhouse://", "clickhouses://")):
        print("llmtap: --apply needs --store clickhouse://user:pass@host:8123/db", file=sys.stderr)
        return 2
    import clickhouse_connect

    from .store.clickhouse import parse_url

    cfg = parse_url(args.store)
    deadline = time.monotonic() + 60
    while True:
        try:
            client = clickhouse_connect.get_client(
                host=cfg["host"],
                port=cfg["port"],
                username=cfg["username"],
                password=cfg["password"],
                secure=cfg["secure"],
            )
            break
        except Exception as e:
            if time.monotonic() > deadline:
                print(f"llmtap: cannot reach {cfg['host']}:{cfg['port']}: {e}", file=sys.stderr)
                return 1
            time.sleep(1)
    for stmt in stmts:
        client.command(stmt)
    print(f"llmtap: applied {len(stmts)} statements to {cfg['host']}:{cfg['port']}", file=sys.stderr)
    return 0


def _duration_s(text: str, what: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not m:
        raise SystemExit(f"llmtap: {what} takes a duration like 30m, 1h, 7d; got {text!r}")
    return int(float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)])


def query_rows(args: argparse.Namespace, sql: str) -> list[dict[str, Any]]:
    """Rows of a read-only query: through a running sidecar's admin API, else from the store."""
    res = _post_sql(args.admin, args.admin_token, sql, "JSONEachRow") if args.admin else None
    if res is not None:
        status, body = res
        if status != 200:
            raise SystemExit(f"llmtap: {body.decode(errors='replace').strip()}")
    else:
        from .admin import run_sql
        from .store.open import open_backend

        backend = open_backend(_store_url(args))
        if backend is None:
            raise SystemExit("llmtap: --store none has nothing to query")
        try:
            body = run_sql(backend.query, sql, "JSONEachRow")
        finally:
            backend.close()
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def cmd_check_cost(args: argparse.Namespace) -> int:
    from .alerts import cost_regression_sql

    window = _duration_s(args.window, "--window")
    days = _duration_s(args.baseline, "--baseline") // 86400
    if days < 1:
        raise SystemExit("llmtap: --baseline must be at least 1d")
    t = args.threshold.strip()
    threshold = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    by = tuple(b.strip() for b in args.by.split(",") if b.strip())
    bad = [b for b in by if b not in GROUP_CHOICES]
    if bad:
        raise SystemExit(f"llmtap: --by takes {', '.join(GROUP_CHOICES)}; got {', '.join(bad)}")
    where = "1=1"
    if args.service:
        where = "service = '" + args.service.replace("\\", "").replace("'", "") + "'"
    value = "per_call_ratio" if args.metric == "per_call" else "ratio"
    rows = query_rows(args, cost_regression_sql(window, days, by, args.min_samples, where, value))
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
    print(_format_table(headers, table) if table else "(no group has enough calls in both periods)")
    if regressed:
        print(f"{len(regressed)} regression(s)", file=sys.stderr)
        return 1
    return 0


def _format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def cmd_report(args: argparse.Namespace) -> int:
    since = _duration_s(args.since, "--since")
    rng = f"timestamp >= now() - INTERVAL {since} SECOND"
    total = query_rows(
        args,
        f"""SELECT count() AS calls, round(sum(cost_usd), 4) AS cost_usd,
        sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
        countIf(outcome = 'error') AS errors, countIf(outcome = 'cancelled') AS cancelled,
        round(quantiles(0.5, 0.95)(ttft_ms)[1]) AS ttft_p50, round(quantiles(0.5, 0.95)(ttft_ms)[2]) AS ttft_p95,
        round(quantiles(0.5, 0.95)(duration_ms)[1]) AS duration_p50,
        round(quantiles(0.5, 0.95)(duration_ms)[2]) AS duration_p95
        FROM llm_calls WHERE {rng}""",
    )[0]
    models = query_rows(
        args,
        f"""SELECT provider, request_model AS model, count() AS calls,
        round(sum(cost_usd), 4) AS cost_usd, sum(input_tokens) AS input, sum(output_tokens) AS output,
        round(quantile(0.95)(ttft_ms)) AS ttft_p95_ms, round(countIf(outcome = 'error') / count(), 3) AS error_rate
        FROM llm_calls WHERE {rng} GROUP BY provider, model ORDER BY cost_usd DESC, calls DESC LIMIT 20""",
    )
    errs = query_rows(
        args,
        f"""SELECT provider, error_type, count() AS calls, countIf(mid_stream_error) AS mid_stream
        FROM llm_calls WHERE {rng} AND outcome = 'error' GROUP BY provider, error_type ORDER BY calls DESC LIMIT 20""",
    )
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover - rich is a dependency
        Console = None  # type: ignore[assignment,misc]

    def show(title: str, rows: list[dict[str, Any]]) -> None:
        if not rows:
            print(f"{title}: none")
            return
        cols = list(rows[0])
        if Console is None:
            print(title)
            print(_format_table(cols, [[str(r[c]) for c in cols] for r in rows]))
            return
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


def cmd_seed(args: argparse.Namespace) -> int:
    return synthetic.run(args)


def cmd_ca(args: argparse.Namespace) -> int:
    from .ca import ensure_ca

    print(ensure_ca(Path(args.data_dir).resolve()))
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    from .ca import client_bundle

    bundle = client_bundle(Path(args.data_dir).resolve())
    host, port = _addr(args.listen, "--listen")
    proxy = f"http://{host}:{port}"
    for name, value in (
        ("HTTPS_PROXY", proxy),
        ("https_proxy", proxy),
        ("SSL_CERT_FILE", bundle),
        ("REQUESTS_CA_BUNDLE", bundle),
        ("NODE_EXTRA_CA_CERTS", bundle),
    ):
        print(f"export {name}='{value}'")
    return 0


def cmd_mock(args: argparse.Namespace) -> int:
    from .mock import serve

    host, port = _addr(args.listen, "--listen")
    return serve(host, port, Path(args.cert_dir))


class JsonFormatter(logging.Formatter):
    converter = time.gmtime  # type: ignore[assignment]  # UTC timestamps

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        call = getattr(record, "llm_call", None)
        if isinstance(call, dict):
            out.update(call)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger("llmtap.calls").setLevel(logging.WARNING)  # per-call lines only in JSON mode
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    logging.getLogger("mitmproxy").setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(str(args.log_level), args.log_format)
    handlers = {
        "run": cmd_run,
        "sql": cmd_sql,
        "ca": cmd_ca,
        "env": cmd_env,
        "mock-provider": cmd_mock,
        "schema": cmd_schema,
        "check-cost": cmd_check_cost,
        "report": cmd_report,
        "seed": cmd_seed,
        "demo": lambda a: demo.run(a),
    }
    return handlers[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
