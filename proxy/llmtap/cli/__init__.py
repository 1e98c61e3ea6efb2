"""The ``llmtap`` command line: flags (:mod:`.parser`) and dispatch; the commands live in
:mod:`.query` (the read commands), :mod:`.explain`, :mod:`.reconcile`, :mod:`.execcmd` and
:mod:`.tools` (the rest), each registering its own parsers."""

from __future__ import annotations

import os
import sys

from ..config import Environment
from ..errors import LlmtapError
from ..telemetry.logs import setup_logging
from .parser import build_parser


def main(argv: list[str] | None = None, env: Environment | None = None) -> int:
    """Exit codes: 0 ok, 1 a finding (``check-cost``: a regression), 2 a usage or start-up error
    (any :class:`~llmtap.errors.LlmtapError`: one line on stderr naming the flag and the fix),
    3 ``check-cost`` had nothing to compare.

    ``env`` is the process environment (read here, once, when not given)."""
    env = env if env is not None else Environment.read()
    args = build_parser(env).parse_args(argv)
    setup_logging(str(args.log_level), args.log_format)
    try:
        return int(args.func(args, env))
    except LlmtapError as e:
        from .terminal import one_line

        print(one_line(f"llmtap {args.command}: {e}"), file=sys.stderr)  # messages quote stored values
        return 2
    except BrokenPipeError:  # `llmtap ... | head`: the reader went away, which is not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


__all__ = ["build_parser", "main"]
