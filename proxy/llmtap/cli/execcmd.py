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

from ..clientenv import client_env, proxy_url
from .parser import addr

USAGE = "llmtap exec [--service NAME] -- CMD [ARGS...]"


def listening(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def cmd_exec(args: argparse.Namespace) -> int:
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
    env = {**os.environ, **client_env(proxy_url(host, port, service, args.proxy_password), bundle, os.environ)}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(cmd[0], cmd, env)
    except FileNotFoundError:
        print(f"llmtap exec: command not found: {cmd[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"llmtap exec: permission denied: {cmd[0]}", file=sys.stderr)
        return 126
    return 0  # not reached: the program replaced this process
