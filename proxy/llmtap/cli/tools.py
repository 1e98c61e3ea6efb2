"""The other commands: ``run``, ``schema``, ``ca``, ``env``, ``mock-provider``, ``seed``, ``demo``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..config import Environment, RunConfig, library_environment
from .parser import DEFAULT_DATA_DIR, DEFAULT_LISTEN, Commands, addr, fail


def register(commands: Commands) -> None:
    from ..testing import demo, synthetic

    run = commands.add("run", cmd_run, "run the sidecar proxy")
    commands.config_flags(run, RunConfig)

    sch = commands.add("schema", cmd_schema, "print (or apply) the ClickHouse schema")
    commands.flag(sch, "--db", "llmtap", help="database name (default llmtap)")
    commands.flag(sch, "--cluster", "", help="emit the ON CLUSTER / Replicated / Distributed form")
    sch.add_argument("--apply", action="store_true", help="run it against --store (a clickhouse:// URL)")
    commands.flag(sch, "--store", help="clickhouse://user:pass@host:8123/db for --apply")

    dm = commands.add("demo", cmd_demo, "mock provider + sidecar + live traffic: filled dashboards")
    demo.add_arguments(dm)
    seed = commands.add("seed", cmd_seed, "fill a store with synthetic history (demo, dashboards)")
    synthetic.add_arguments(seed)

    ca = commands.add("ca", cmd_ca, "print the CA certificate path")
    commands.flag(ca, "--data-dir", DEFAULT_DATA_DIR)
    envp = commands.add("env", cmd_env, "print the shell exports a client needs")
    commands.flag(envp, "--data-dir", DEFAULT_DATA_DIR)
    commands.flag(envp, "--listen", DEFAULT_LISTEN)

    mock = commands.add("mock-provider", cmd_mock, "a local HTTPS server replaying realistic LLM streams")
    commands.flag(mock, "--listen", "127.0.0.1:0", var="LLMTAP_MOCK_LISTEN")
    commands.flag(mock, "--cert-dir", "./llmtap-mock", var="LLMTAP_MOCK_CERT_DIR")


def cmd_run(args: argparse.Namespace, env: Environment) -> int:
    from ..app import run

    cfg = RunConfig.from_flags(args, env)
    library_environment(cfg)
    try:
        return run(cfg)
    except FileNotFoundError as e:  # llmtap's own errors (a store URL, a price file, …) are one line in main
        fail(str(e))


def cmd_schema(args: argparse.Namespace, env: Environment) -> int:
    """Print the schema, or (``--apply``) bring a server store to it: created where missing, upgraded in place
    from any earlier release's schema (:func:`llmtap.store.schema.apply_schema`), rows untouched."""
    from ..store import cluster_statements, schema_statements

    try:
        stmts = cluster_statements(args.db, args.cluster) if args.cluster else schema_statements(args.db)
    except ValueError as e:
        fail(str(e))
    if not args.apply:
        print(";\n\n".join(stmts) + ";")
        return 0
    if not args.store or not args.store.startswith(("clickhouse://", "clickhouses://")):
        fail("--apply needs --store clickhouse://user:pass@host:8123/db")
    from ..startup import store_identity
    from ..store.clickhouse import ClickHouseURLError, connect_client, failure_text, parse_url
    from ..store.schema import SCHEMA_VERSION, apply_schema

    try:
        cfg = parse_url(args.store)
    except ClickHouseURLError as e:
        fail(str(e))
    where = store_identity(args.store)
    db = args.db if args.db != "llmtap" else cfg["database"]  # the URL's database unless --db names one
    deadline = time.monotonic() + 60
    while True:
        try:
            client = connect_client(cfg, None, 5.0, 300)
            break
        except Exception as e:
            if time.monotonic() > deadline:
                fail(f"{where}: {failure_text(e)}")
            time.sleep(1)
    try:
        if args.cluster:  # the cluster form creates what is missing; see docs/deploy.md for its upgrades
            for stmt in stmts:
                client.command(stmt)
            print(f"llmtap schema: applied {len(stmts)} statements to {where}", file=sys.stderr)
            return 0
        outcome = apply_schema(client.command, client.command, db)
    except Exception as e:
        fail(f"{where}: {failure_text(e)}")
    done = {"created": "created at", "upgraded": "upgraded to", "current": "already at"}[outcome]
    print(f"llmtap schema: database {db} on {where} {done} schema version {SCHEMA_VERSION}", file=sys.stderr)
    return 0


def cmd_ca(args: argparse.Namespace, env: Environment) -> int:
    from ..intercept.ca import ensure_ca

    print(ensure_ca(Path(args.data_dir).resolve()))
    return 0


def cmd_env(args: argparse.Namespace, env: Environment) -> int:
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


def cmd_mock(args: argparse.Namespace, env: Environment) -> int:
    from ..testing.mock import serve

    host, port = addr(args.listen, "--listen")
    return serve(host, port, Path(args.cert_dir), env.mock)


def cmd_seed(args: argparse.Namespace, env: Environment) -> int:
    from ..testing import synthetic

    return synthetic.run(args)


def cmd_demo(args: argparse.Namespace, env: Environment) -> int:
    from ..testing import demo

    return demo.run(args)
