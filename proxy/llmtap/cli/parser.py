"""The ``llmtap`` flags. Every flag also reads ``LLMTAP_<FLAG>`` from the environment.

Option groups shared by several commands are parent parsers (as mitmproxy's
``tools/cmdline.py`` shares option groups): logging, the store to read, the admin API to ask.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .. import __version__
from ..intercept.routing import parse_host_port

DEFAULT_LISTEN = "127.0.0.1:8080"
DEFAULT_ADMIN = "127.0.0.1:9464"
DEFAULT_DATA_DIR = "./llmtap-data"
GROUP_CHOICES = ("model", "feature", "provider", "service", "user", "key", "tenant")


def env(flag: str, default: Any = None) -> Any:
    return os.environ.get("LLMTAP_" + flag.upper().replace("-", "_"), default)


def env_list(flag: str) -> list[str]:
    v = env(flag, "")
    return [x.strip() for x in v.split(",") if x.strip()] if v else []


def env_bool(flag: str) -> bool:
    return str(env(flag, "")).lower() in ("1", "true", "yes", "on")


def addr(spec: str, what: str) -> tuple[str, int]:
    try:
        host, port = parse_host_port(spec)
    except ValueError as e:
        raise SystemExit(f"llmtap: invalid {what} {spec!r}: {e}") from None
    if port is None:
        raise SystemExit(f"llmtap: {what} needs HOST:PORT, got {spec!r}")
    return host, port


def connect_to(specs: list[str]) -> dict[tuple[str, int], tuple[str, int]]:
    out: dict[tuple[str, int], tuple[str, int]] = {}
    for spec in specs:
        parts = spec.split(":")
        if len(parts) != 4 or not parts[1].isdigit() or not parts[3].isdigit():
            raise SystemExit(f"llmtap: --connect-to takes HOST:PORT:ADDR:PORT, got {spec!r}")
        out[(parts[0].lower(), int(parts[1]))] = (parts[2], int(parts[3]))
    return out


def _logging_group() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--log-level", default=env("log-level", "INFO"))
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=env("log-format", "text"),
        help="json: one JSON object per line, including one 'llm call' line per call",
    )
    return p


def _store_group() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--data-dir",
        default=env("data-dir", DEFAULT_DATA_DIR),
        help="CA, embedded store, spool (default ./llmtap-data)",
    )
    p.add_argument(
        "--store",
        default=env("store"),
        help="chdb://PATH (default chdb://<data-dir>/store) or clickhouse://user:pass@host:8123/db",
    )
    return p


def _admin_group() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--admin", default=env("admin", DEFAULT_ADMIN), help="a running sidecar's admin address")
    p.add_argument("--admin-token", default=env("admin-token", ""))
    return p


def _run_flags(run: argparse.ArgumentParser) -> None:
    run.add_argument("--listen", default=env("listen", DEFAULT_LISTEN), help="proxy address HOST:PORT")
    run.add_argument("--admin", default=env("admin", DEFAULT_ADMIN), help="admin HTTP address HOST:PORT")
    run.add_argument(
        "--intercept",
        action="append",
        default=env_list("intercept"),
        metavar="HOST[:PORT]",
        help="also intercept this host (repeatable; env: comma-separated)",
    )
    run.add_argument("--upstream-ca", default=env("upstream-ca"), help="extra CA bundle for upstream TLS")
    run.add_argument(
        "--otlp-endpoint",
        default=env("otlp-endpoint", os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")),
        help="OTLP endpoint for spans",
    )
    run.add_argument(
        "--capture-content",
        action="store_true",
        default=env_bool("capture-content"),
        help="opt-in prompt/response capture (redacted, size-capped)",
    )
    run.add_argument(
        "--service",
        default=env("service", os.environ.get("OTEL_SERVICE_NAME", "")),
        help="service name for calls without x-llmtap-service (default $OTEL_SERVICE_NAME)",
    )
    run.add_argument(
        "--connect-to",
        action="append",
        default=env_list("connect-to"),
        metavar="HOST:PORT:ADDR:PORT",
        help="connect to ADDR:PORT for HOST:PORT (TLS name unchanged), as curl --connect-to",
    )
    run.add_argument("--proxy-auth", default=env("proxy-auth", ""), help="USER:PASS required from clients")
    run.add_argument(
        "--allow-open-proxy",
        action="store_true",
        default=env_bool("allow-open-proxy"),
        help="allow a non-loopback --listen without --proxy-auth",
    )
    run.add_argument("--admin-token", default=env("admin-token", ""), help="bearer token for the admin API")
    run.add_argument(
        "--admin-token-file",
        default=env("admin-token-file", ""),
        help="read the admin bearer token from this file (e.g. a container secret)",
    )
    run.add_argument(
        "--spool-max-mb",
        type=int,
        default=int(env("spool-max-mb", 1024)),
        help="bound of the on-disk spool (records waiting for the store), default 1024",
    )
    run.add_argument("--prices", default=env("prices"), help="price file (JSON/TOML) overriding genai-prices")
    run.add_argument(
        "--content-retention-days",
        type=int,
        default=int(env("content-retention-days", 7)),
        help="days captured content is kept (llm_content TTL), default 7",
    )
    run.add_argument(
        "--traces-retention-days",
        type=int,
        default=int(env("traces-retention-days", 0)),
        help="days otel_traces rows are kept, 0 = forever (default)",
    )
    run.add_argument(
        "--alert-webhook",
        default=env("alert-webhook", ""),
        help="POST alerts (the baseline rules, evaluated here) to this URL as Slack-compatible JSON",
    )
    run.add_argument(
        "--alert-interval",
        default=env("alert-interval", "60s"),
        help="how often the alert rules are evaluated (default 60s)",
    )
    run.add_argument(
        "--grafana-url",
        default=env("grafana-url", ""),
        help="Grafana's base URL: the viewer's call page links to its trace view there",
    )
    run.add_argument(
        "--calls-retention-days",
        type=int,
        default=int(env("calls-retention-days", 0)),
        help="days llm_calls rows are kept, 0 = forever (default)",
    )


def build_parser() -> argparse.ArgumentParser:
    from ..testing import demo, synthetic

    p = argparse.ArgumentParser(prog="llmtap", description="Observability sidecar for LLM API traffic.")
    p.add_argument("--version", action="version", version=f"llmtap {__version__}")
    logp, storep, adminp = _logging_group(), _store_group(), _admin_group()
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", parents=[logp, storep], help="run the sidecar proxy")
    _run_flags(run)

    sql = sub.add_parser("sql", parents=[logp, adminp, storep], help="read-only SQL on the store")
    sql.add_argument("query")
    sql.add_argument("--format", default=env("format"), help="ClickHouse output format (JSONEachRow, CSV, ...)")

    sch = sub.add_parser("schema", parents=[logp], help="print (or apply) the ClickHouse schema")
    sch.add_argument("--db", default=env("db", "llmtap"), help="database name (default llmtap)")
    sch.add_argument(
        "--cluster", default=env("cluster", ""), help="emit the ON CLUSTER / Replicated / Distributed form"
    )
    sch.add_argument("--apply", action="store_true", help="run it against --store (a clickhouse:// URL)")
    sch.add_argument("--store", default=env("store"), help="clickhouse://user:pass@host:8123/db for --apply")

    cc = sub.add_parser(
        "check-cost", parents=[logp, adminp, storep], help="exit 1 when cost regressed against its baseline"
    )
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

    from .explain import add_parsers as explain_parsers

    explain_parsers(sub, [logp, adminp, storep])

    rp = sub.add_parser(
        "report", parents=[logp, adminp, storep], help="a terminal summary of calls, cost, latency and errors"
    )
    rp.add_argument("--since", default="24h", help="time range back from now (e.g. 1h, 7d)")

    dm = sub.add_parser("demo", parents=[logp], help="mock provider + sidecar + live traffic: filled dashboards")
    demo.add_arguments(dm)

    seed = sub.add_parser("seed", parents=[logp], help="fill a store with synthetic history (demo, dashboards)")
    synthetic.add_arguments(seed)

    ca = sub.add_parser("ca", parents=[logp], help="print the CA certificate path")
    ca.add_argument("--data-dir", default=env("data-dir", DEFAULT_DATA_DIR))

    envp = sub.add_parser("env", parents=[logp], help="print the shell exports a client needs")
    envp.add_argument("--data-dir", default=env("data-dir", DEFAULT_DATA_DIR))
    envp.add_argument("--listen", default=env("listen", DEFAULT_LISTEN))

    ex = sub.add_parser(
        "exec",
        parents=[logp],
        help="run a command with its LLM calls going through the sidecar (tagged with --service)",
        usage="llmtap exec [--service NAME] -- CMD [ARGS...]",
    )
    ex.add_argument("--service", default=env("service", ""), help="service name of its calls (default: CMD)")
    ex.add_argument("--listen", default=env("listen", DEFAULT_LISTEN), help="the sidecar's proxy address")
    ex.add_argument("--data-dir", default=env("data-dir", DEFAULT_DATA_DIR), help="the sidecar's data dir (its CA)")
    ex.add_argument(
        "--proxy-password",
        default=env("proxy-password", "x"),
        help="the proxy password, when the sidecar runs with --proxy-auth (else ignored)",
    )
    ex.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]")

    mock = sub.add_parser("mock-provider", parents=[logp], help="a local HTTPS server replaying realistic LLM streams")
    mock.add_argument("--listen", default=env("mock-listen", "127.0.0.1:0"))
    mock.add_argument("--cert-dir", default=env("mock-cert-dir", "./llmtap-mock"))
    return p
