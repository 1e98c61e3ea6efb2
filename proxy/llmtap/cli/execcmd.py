"""``llmtap exec [--service NAME] -- CMD [ARGS…]``: run an unmodified program through the sidecar.

The program gets every variable a client needs (:mod:`llmtap.clientenv`), with the service in
the proxy URL's user, and replaces this process (``execvpe``): it keeps the terminal, receives
the signals, and its exit status is ``llmtap exec``'s. No sidecar is started: when none listens
on ``--listen``, one line on stderr says so and the program runs anyway (its calls through the
proxy fail until ``llmtap run`` is up).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from ..clientenv import detect_node, exec_env, proxy_url
from ..config import Environment
from .parser import DEFAULT_DATA_DIR, DEFAULT_LISTEN, Commands, addr

USAGE = "llmtap exec [--service NAME] -- CMD [ARGS...]"


def listening(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def register(commands: Commands) -> None:
    ex = commands.add(
        "exec",
        cmd_exec,
        "run a command with its LLM calls going through the sidecar (tagged with --service)",
        usage=USAGE,
    )
    commands.flag(ex, "--service", "", help="service name of its calls (default: CMD)")
    commands.flag(ex, "--listen", DEFAULT_LISTEN, help="the sidecar's proxy address")
    commands.flag(ex, "--data-dir", DEFAULT_DATA_DIR, help="the sidecar's data dir (its CA)")
    commands.flag(
        ex, "--proxy-password", "x", help="the proxy password, when the sidecar runs with --proxy-auth (else ignored)"
    )
    ex.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]")


def cmd_exec(args: argparse.Namespace, env: Environment) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print(f"llmtap exec: no command given; usage: {USAGE}", file=sys.stderr)
        return 2
    host, port = addr(args.listen, "--listen")
    data_dir = Path(args.data_dir).resolve()
    if not (data_dir / "ca" / "mitmproxy-ca-cert.pem").exists():
        print(
            f"llmtap exec: no llmtap CA in {data_dir}: start `llmtap run --data-dir {data_dir}` once, "
            "or pass the sidecar's --data-dir",
            file=sys.stderr,
        )
        return 2
    from ..intercept.ca import client_bundle

    bundle = client_bundle(data_dir)
    service = args.service or os.path.basename(cmd[0])
    if not listening(host, port):
        print(
            f"llmtap exec: no llmtap sidecar is listening on {host}:{port} (exec starts none: run `llmtap run`); "
            f"running {cmd[0]} anyway, its LLM calls will fail to connect",
            file=sys.stderr,
        )
    proxy = proxy_url(host, port, service, args.proxy_password)
    child = {**env.variables, **exec_env(proxy, bundle, env.variables, detect_node())}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(cmd[0], cmd, child)
    except FileNotFoundError:
        print(f"llmtap exec: command not found: {cmd[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"llmtap exec: permission denied: {cmd[0]}", file=sys.stderr)
        return 126
    return 0  # not reached: the program replaced this process
