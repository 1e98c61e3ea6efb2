"""The other commands: ``run``, ``schema``, ``ca``, ``env``, ``mock-provider``, ``seed``, ``demo``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..intercept.routing import parse_host_port
from .parser import DEFAULT_DATA_DIR, addr, connect_to, fail
from .query import store_url


def _secret(value: str, path: str, flag: str) -> str:
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as e:
            fail(f"{flag} {path}: cannot read it ({e.strerror})")
    return value


def _token(token: str, path: str) -> str:
    return _secret(token, path, "--admin-token-file")


def _alert_interval(text: str) -> float:
    from ..durations import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as e:
        fail(f"--alert-interval: {e}")
    if seconds < 1:
        fail("--alert-interval must be at least 1s")
    return seconds


def cmd_run(args: argparse.Namespace) -> int:
    from ..app import RunConfig, run
    from ..store import StoreURLError
    from ..telemetry import PriceFileError

    cfg = RunConfig(
        listen=addr(args.listen, "--listen"),
        admin=addr(args.admin, "--admin"),
        data_dir=Path(args.data_dir or DEFAULT_DATA_DIR).resolve(),
        store=store_url(args),
        intercept=list(args.intercept),
        upstream_ca=Path(args.upstream_ca) if args.upstream_ca else None,
        connect_to=connect_to(args.connect_to),
        service=args.service,
        proxy_auth=_secret(args.proxy_auth, args.proxy_auth_file, "--proxy-auth-file"),
        allow_open_proxy=args.allow_open_proxy,
        admin_token=_token(args.admin_token, args.admin_token_file),
        admin_allowed_hosts=list(args.admin_allowed_host),
        read_store=args.read_store or "",
        otlp_endpoint=args.otlp_endpoint or "",
        capture_content=args.capture_content,
        prices=Path(args.prices) if args.prices else None,
        content_retention_days=args.content_retention_days,
        traces_retention_days=args.traces_retention_days,
        calls_retention_days=args.calls_retention_days,
        spool_max_mb=args.spool_max_mb,
        max_client_connections=args.max_client_connections,
        client_header_timeout=args.client_header_timeout,
        drain_timeout=args.drain_timeout,
        alert_webhook=args.alert_webhook,
        alert_interval_s=_alert_interval(args.alert_interval),
        grafana_url=args.grafana_url,
        workers=args.workers,
        log_level=str(args.log_level),
        log_format=args.log_format,
    )
    for spec in cfg.intercept:
        try:
            parse_host_port(spec)
        except ValueError as e:
            fail(f"--intercept {spec!r}: {e}")
    try:
        return run(cfg)
    except (StoreURLError, FileNotFoundError, PriceFileError) as e:
        fail(str(e))


def cmd_schema(args: argparse.Namespace) -> int:
    from ..store import cluster_statements, schema_statements

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

    from ..store.clickhouse import ClickHouseURLError, parse_url

    try:
        cfg = parse_url(args.store)
    except ClickHouseURLError as e:
        fail(str(e))
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


def cmd_ca(args: argparse.Namespace) -> int:
    from ..intercept.ca import ensure_ca

    print(ensure_ca(Path(args.data_dir).resolve()))
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    """The exports a client needs (:mod:`llmtap.clientenv`), for the Node on PATH when there is one."""
    from ..clientenv import base_url_env, client_env, detect_node, shell_exports
    from ..intercept.ca import client_bundle
    from ..startup import read_lock

    data_dir = Path(args.data_dir).resolve()
    host, port = addr(args.listen, "--listen")
    if read_lock(data_dir) is None:
        print(
            f"llmtap env: no sidecar is running on {data_dir} (yet): these point at the CA `llmtap run --data-dir "
            f"{data_dir}` uses; for another sidecar pass its --data-dir",
            file=sys.stderr,
        )
    bundle = client_bundle(data_dir)
    lines = shell_exports(client_env(f"http://{host}:{port}", bundle, detect_node()))
    base = " ".join(f"{v.name}={v.value}" for v in base_url_env(host, port))
    lines.append(f"# or, with no proxy and no CA (base-URL mode, any runtime): export {base}")
    print("\n".join(lines))
    return 0


def cmd_mock(args: argparse.Namespace) -> int:
    from ..testing.mock import serve

    host, port = addr(args.listen, "--listen")
    return serve(host, port, Path(args.cert_dir))


def cmd_seed(args: argparse.Namespace) -> int:
    from ..testing import synthetic

    return synthetic.run(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from ..testing import demo

    return demo.run(args)
