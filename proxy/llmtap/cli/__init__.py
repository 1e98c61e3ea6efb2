"""The ``llmtap`` command line: flags (:mod:`.parser`) and dispatch; the commands live in
:mod:`.query` (the read commands) and :mod:`.tools` (the rest)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from ..startup import StartupError
from ..telemetry.logs import setup_logging
from . import execcmd, explain, query, reconcile, tools
from .parser import UsageError, build_parser

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": tools.cmd_run,
    "sql": query.cmd_sql,
    "report": query.cmd_report,
    "check-cost": query.cmd_check_cost,
    "explain-cost": explain.cmd_explain_cost,
    "explain-latency": explain.cmd_explain_latency,
    "reconcile": reconcile.cmd_reconcile,
    "schema": tools.cmd_schema,
    "ca": tools.cmd_ca,
    "env": tools.cmd_env,
    "exec": execcmd.cmd_exec,
    "mock-provider": tools.cmd_mock,
    "seed": tools.cmd_seed,
    "demo": tools.cmd_demo,
}


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 ok, 1 a finding (``check-cost``: a regression), 2 a usage or start-up error
    (one line on stderr naming the flag and the fix), 3 ``check-cost`` had nothing to compare."""
    args = build_parser().parse_args(argv)
    setup_logging(str(args.log_level), args.log_format)
    try:
        return COMMANDS[args.command](args)
    except (UsageError, StartupError) as e:
        print(f"llmtap {args.command}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `llmtap ... | head`: the reader went away, which is not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


__all__ = ["COMMANDS", "build_parser", "main"]
