"""The ``llmtap`` command line: flags (:mod:`.parser`) and dispatch; the commands live in
:mod:`.query` (the read commands) and :mod:`.tools` (the rest)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..telemetry.logs import setup_logging
from . import execcmd, explain, query, tools
from .parser import build_parser

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": tools.cmd_run,
    "sql": query.cmd_sql,
    "report": query.cmd_report,
    "check-cost": query.cmd_check_cost,
    "explain-cost": explain.cmd_explain_cost,
    "explain-latency": explain.cmd_explain_latency,
    "schema": tools.cmd_schema,
    "ca": tools.cmd_ca,
    "env": tools.cmd_env,
    "exec": execcmd.cmd_exec,
    "mock-provider": tools.cmd_mock,
    "seed": tools.cmd_seed,
    "demo": tools.cmd_demo,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(str(args.log_level), args.log_format)
    return COMMANDS[args.command](args)


__all__ = ["COMMANDS", "build_parser", "main"]
