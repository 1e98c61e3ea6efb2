"""The ``llmtap`` flags. Every flag also reads ``LLMTAP_<FLAG>`` from the environment.

Option groups shared by several commands are parent parsers (as mitmproxy's
``tools/cmdline.py`` shares option groups): logging, the store to read, the admin API to ask.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from typing import Any, NoReturn

from .. import __version__
from ..intercept.routing import parse_host_port

DEFAULT_LISTEN = "127.0.0.1:8080"
DEFAULT_ADMIN = "127.0.0.1:9464"
DEFAULT_DATA_DIR = "./llmtap-data"
GROUP_CHOICES = ("model", "feature", "provider", "service", "user", "key", "tenant")


class UsageError(Exception):
    """A bad flag value: :func:`llmtap.cli.main` prints it as one line and exits 2."""


def fail(message: str) -> NoReturn:
    raise UsageError(message)


class Parser(argparse.ArgumentParser):
    """argparse, with errors on one line that name the command and where to look (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _env_name(flag: str) -> str:
    return "LLMTAP_" + flag.lstrip("-").upper().replace("-", "_")


def number(flag: str, kind: type, minimum: float, unit: str = "") -> Callable[[str], Any]:
    """An argparse type: ``kind`` (int or float) ``>= minimum``; the message names the flag's
    environment variable when the bad value came from there."""

    def convert(text: str) -> Any:
        try:
            value = kind(text)
            ok = math.isfinite(value) and value >= minimum
        except (TypeError, ValueError):
            ok = False
        if not ok:
            what = "a whole number" if kind is int else "a number"
            src = f" (from ${_env_name(flag)})" if os.environ.get(_env_name(flag)) == text else ""
            raise argparse.ArgumentTypeError(f"expected {what} >= {minimum:g}{unit}, got {text!r}{src}")
        return value

    return convert


def duration(flag: str) -> Callable[[str], float]:
    """An argparse type: a duration (``30s``, ``5m``, or bare seconds) in seconds."""
    from ..durations import parse_duration

    def convert(text: str) -> float:
        try:
            return parse_duration(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


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
        fail(f"{what} {spec!r}: {e}; expected HOST:PORT, e.g. 127.0.0.1:8080")
    if port is None:
        fail(f"{what} needs HOST:PORT, got {spec!r}")
    if not 0 <= port < 65536:
        fail(f"{what} {spec!r}: the port must be 1-65535 (0: any free port, where a command allows it)")
    return host, port


def connect_to(specs: list[str]) -> dict[tuple[str, int], tuple[str, int]]:
    out: dict[tuple[str, int], tuple[str, int]] = {}
    for spec in specs:
        parts = spec.split(":")
        if len(parts) != 4 or not parts[1].isdigit() or not parts[3].isdigit():
            fail(f"--connect-to takes HOST:PORT:ADDR:PORT, got {spec!r}")
        out[(parts[0].lower(), int(parts[1]))] = (parts[2], int(parts[3]))
    return out


def _logging_group() -> Parser:
    p = Parser(add_help=False)
    p.add_argument("--log-level", default=env("log-level", "INFO"))
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=env("log-format", "text"),
        help="json: one JSON object per line, including one 'llm call' line per call",
    )
    return p


def _store_group() -> Parser:
    p = Parser(add_help=False)
    p.add_argument(
        "--data-dir",
        default=env("data-dir"),  # None when not given: the read commands tell "asked for" from the default
        help="CA, embedded store, spool (default ./llmtap-data)",
    )
    p.add_argument(
        "--store",
        default=env("store"),
        help="chdb://PATH (default chdb://<data-dir>/store) or clickhouse://user:pass@host:8123/db",
    )
    p.add_argument(
        "--read-store",
        default=env("read-store", ""),
        help="clickhouse://reader:pass@host:8123/db: the credentials every read uses (a user with SELECT only)",
    )
    return p


def _admin_group() -> Parser:
    p = Parser(add_help=False)
    p.add_argument(
        "--admin",
        default=env("admin"),
        help="ask the sidecar at this admin address (default: the sidecar running on --data-dir, if any)",
    )
    p.add_argument(
        "--admin-token",
        default=env("admin-token", ""),
        help="the admin token (default: <data-dir>/admin-token of this install)",
    )
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
    run.add_argument(
        "--proxy-auth",
        default=env("proxy-auth", ""),
        help="USER:PASS or @HTPASSWD_FILE required from clients (prefer LLMTAP_PROXY_AUTH or --proxy-auth-file: "
        "arguments are visible in ps)",
    )
    run.add_argument(
        "--proxy-auth-file",
        default=env("proxy-auth-file", ""),
        help="read USER:PASS for --proxy-auth from this file (e.g. a container secret)",
    )
    run.add_argument(
        "--allow-open-proxy",
        action="store_true",
        default=env_bool("allow-open-proxy"),
        help="allow a non-loopback --listen without --proxy-auth",
    )
    run.add_argument(
        "--admin-token",
        default=env("admin-token", ""),
        help="bearer token for the admin API (default: generated in <data-dir>/admin-token); prefer the env "
        "LLMTAP_ADMIN_TOKEN or --admin-token-file: arguments are visible in ps",
    )
    run.add_argument(
        "--admin-allowed-host",
        action="append",
        default=env_list("admin-allowed-host"),
        metavar="NAME",
        help="a host name the admin API may be reached by besides loopback names and IP addresses (repeatable)",
    )
    run.add_argument(
        "--admin-token-file",
        default=env("admin-token-file", ""),
        help="read the admin bearer token from this file (e.g. a container secret)",
    )
    run.add_argument(
        "--spool-max-mb",
        type=number("--spool-max-mb", int, 1, " MiB"),
        default=env("spool-max-mb", "1024"),
        help="bound of the on-disk spool (records waiting for the store), default 1024",
    )
    run.add_argument(
        "--max-client-connections",
        type=number("--max-client-connections", int, 1),
        default=env("max-client-connections", "4096"),
        help="client connections the proxy holds at once (the longest idle is closed for a new one), default 4096",
    )
    run.add_argument(
        "--client-header-timeout",
        type=duration("--client-header-timeout"),
        default=env("client-header-timeout", "30s"),
        help="time a new client connection has to send its first request, default 30s",
    )
    run.add_argument(
        "--workers",
        type=number("--workers", int, 0),
        default=env("workers", "0"),
        help="proxy processes sharing the listening port (0: one per usable core, at most 4), default 0",
    )
    run.add_argument(
        "--drain-timeout",
        type=duration("--drain-timeout"),
        default=env("drain-timeout", "30s"),
        help="on SIGTERM/SIGINT, time in-flight calls get to finish before they are cut (default 30s)",
    )
    run.add_argument("--prices", default=env("prices"), help="price file (JSON/TOML) overriding genai-prices")
    run.add_argument(
        "--content-retention-days",
        type=number("--content-retention-days", int, 0),
        default=env("content-retention-days", "7"),
        help="days captured content is kept (llm_content TTL), default 7",
    )
    run.add_argument(
        "--traces-retention-days",
        type=number("--traces-retention-days", int, 0),
        default=env("traces-retention-days", "0"),
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
        type=number("--calls-retention-days", int, 0),
        default=env("calls-retention-days", "0"),
        help="days llm_calls rows are kept, 0 = forever (default)",
    )


EXIT_NOTHING_TO_COMPARE = 3
"""``check-cost``: no group had enough calls in the window and in the baseline (0 ok, 1 regression, 2 usage)."""


def threshold(text: str) -> float:
    """``20%`` or ``0.2`` → 0.2."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
        if math.isfinite(value) and value >= 0:
            return value
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected a percentage like 20% or a fraction like 0.2, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    from ..testing import demo, synthetic

    p = Parser(prog="llmtap", description="Observability sidecar for LLM API traffic.")
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

    from .explain import add_parsers as explain_parsers

    explain_parsers(sub, [logp, adminp, storep])

    rp = sub.add_parser(
        "report", parents=[logp, adminp, storep], help="a terminal summary of calls, cost, latency and errors"
    )
    rp.add_argument("--since", default="24h", help="time range back from now (e.g. 1h, 7d)")

    rc = sub.add_parser(
        "reconcile",
        parents=[logp, adminp, storep],
        help="tracked cost vs the provider's cost report, per day and model (exit 1 below --min-capture)",
    )
    from .reconcile import add_arguments as reconcile_arguments

    reconcile_arguments(rc)

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
