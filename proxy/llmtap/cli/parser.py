"""The ``llmtap`` command line: one sub-parser per command, registered by the module that runs it.

Each command module has a ``register(commands)`` function that declares its sub-parsers with
:meth:`Commands.add`, which binds the command's function to its parser (``set_defaults(func=…)``):
a command and its flags are written in one place, and :func:`build_parser` calls each module's
``register`` once. A flag that reads ``LLMTAP_<FLAG>`` says so by being added with
:meth:`Commands.flag`; ``llmtap run``'s flags are derived from :class:`llmtap.config.RunConfig`
(name, default, help, variable).

Option groups shared by several commands are parent parsers (as mitmproxy's
``tools/cmdline.py`` shares option groups): logging, the store to read, the admin API to ask.
"""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .. import __version__
from ..config import Environment, RunConfig
from ..errors import UsageError
from ..options import address, env_name, flags

Command = Callable[[argparse.Namespace, Environment], int]
"""A command: its parsed flags and the process environment → the exit code."""

_RUN = {f.name: f for f in flags(RunConfig)}
DEFAULT_LISTEN = _RUN["listen"].default_help
DEFAULT_ADMIN = _RUN["admin"].default_help
DEFAULT_DATA_DIR = _RUN["data_dir"].default_help
GROUP_CHOICES = ("model", "feature", "provider", "service", "user", "key", "tenant")
EXIT_NOTHING_TO_COMPARE = 3
"""``check-cost``: no group had enough calls in the window and in the baseline (0 ok, 1 regression, 2 usage)."""


def fail(message: str) -> NoReturn:
    raise UsageError(message)


class Parser(argparse.ArgumentParser):
    """argparse, with errors on one line that name the command and where to look (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def unrecognized(self, extras: Sequence[str]) -> str:
        """What to say about arguments this command does not take: the flag it likely meant, if any."""
        first = extras[0]
        if not first.startswith("-"):
            return f"unexpected argument {first!r}"
        name = first.split("=", 1)[0]
        known = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        return f"unknown flag {name}" + (f": did you mean {close[0]}?" if close else "")


def number(
    flag: str, kind: type, minimum: float, unit: str = "", env: Environment | None = None
) -> Callable[[str], Any]:
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
            name = env_name(flag)
            src = f" (from ${name})" if env is not None and env.get(name) == text else ""
            raise argparse.ArgumentTypeError(f"expected {what} >= {minimum:g}{unit}, got {text!r}{src}")
        return value

    return convert


def threshold(text: str) -> float:
    """``20%`` or ``0.2`` → 0.2. A bare number above 1 is refused: ``20`` could mean 20 % or +2000 %, and a cost
    gate that silently takes the second lets a +58 % regression through."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
        ok = math.isfinite(value) and value >= 0
    except ValueError:
        ok = False
    if ok and not t.endswith("%") and value > 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is ambiguous: write a percentage ({t}%) or a fraction ({value / 100:g}); a bare number is "
            "a fraction and must be at most 1"
        )
    if not ok:
        raise argparse.ArgumentTypeError(f"expected a percentage like 20% or a fraction like 0.2, got {text!r}")
    return value


def addr(spec: str, what: str) -> tuple[str, int]:
    """``HOST:PORT`` for flag ``what``, or a one-line :class:`~llmtap.errors.UsageError`."""
    try:
        return address(spec)
    except ValueError as e:
        fail(f"{what} {e}")


class Commands:
    """What a command module registers its commands with (see the module doc)."""

    def __init__(self, root: Parser, env: Environment) -> None:
        self.env = env
        self._sub = root.add_subparsers(dest="command", required=True)
        self.env_vars: set[str] = set()  # every LLMTAP_<FLAG> a flag reads
        self.log = self._group(self._logging)
        self.store = self._group(self._store)
        self.admin = self._group(self._admin)
        self.reading = [self.log, self.admin, self.store]  # the read commands: a sidecar's API, else the store

    def add(self, name: str, run: Command, help: str, parents: Sequence[Parser] | None = None, **kw: Any) -> Parser:
        """The sub-parser of command ``name``, bound to ``run`` (the logging flags unless ``parents`` says)."""
        p: Parser = self._sub.add_parser(name, parents=list(parents or [self.log]), help=help, **kw)
        p.set_defaults(func=run)
        return p

    def flag(
        self, p: argparse.ArgumentParser, flag: str, default: Any = None, var: str = "", **kw: Any
    ) -> argparse.Action:
        """``--flag`` whose default is ``$LLMTAP_FLAG`` (or ``var``) when set, else ``default``."""
        name = var or env_name(flag)
        self.env_vars.add(name)
        return p.add_argument(flag, default=self.env.get(name, default), **kw)

    def config_flags(self, p: argparse.ArgumentParser, config: type) -> None:
        """The flags a config type declares (:func:`llmtap.config.option`), read back by its ``from_flags``:
        each stores what was typed (None when not given); the default and the variable are the config's."""
        for f in flags(config):
            self.env_vars.add(f.env)
            shown = f.default_help
            help = f.option.help + (f" (default {shown})" if shown else "") + f" [${f.env}]"
            kw: dict[str, Any] = {"dest": f.name, "default": None, "help": help.replace("%", "%%")}
            if f.option.switch:
                kw["action"] = "store_true"
            else:
                kw["metavar"] = f.option.metavar or f.flag[2:].upper().replace("-", "_")
                if f.option.repeat:
                    kw["action"] = "append"
            p.add_argument(f.flag, **kw)

    # -- shared option groups -------------------------------------------------------------------
    def _group(self, fill: Callable[[Parser], None]) -> Parser:
        p = Parser(add_help=False)
        fill(p)
        return p

    def _logging(self, p: Parser) -> None:
        self.flag(p, "--log-level", "INFO")
        self.flag(
            p,
            "--log-format",
            "text",
            choices=("text", "json"),
            help="json: one JSON object per line, including one 'llm call' line per call",
        )

    def _store(self, p: Parser) -> None:
        # No defaults: the read commands tell a store asked for from the default one.
        for f in (_RUN["data_dir"], _RUN["store"], _RUN["read_store"]):
            shown = f" (default {f.default_help})" if f.default_help else ""
            self.flag(p, f.flag, None if f.name != "read_store" else "", help=f.option.help + shown)

    def _admin(self, p: Parser) -> None:
        self.flag(
            p,
            "--admin",
            help="ask the sidecar at this admin address (default: the sidecar running on --data-dir, if any)",
        )
        self.flag(p, "--admin-token", "", help="the admin token (default: <data-dir>/admin-token of this install)")


class RootParser(Parser):
    """The ``llmtap`` parser; :attr:`env_vars` names every ``LLMTAP_<FLAG>`` its flags read. An argument a
    command does not take is reported by that command's parser (``llmtap run: unknown flag --lisen: did you
    mean --listen?``), not the root's."""

    env_vars: frozenset[str] = frozenset()

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        names = subcommands(self)
        if argv and not argv[0].startswith("-") and argv[0] not in names:
            close = difflib.get_close_matches(argv[0], list(names), n=1, cutoff=0.6)
            self.error(f"unknown command {argv[0]!r}" + (f": did you mean {close[0]}?" if close else ""))
        ns, extras = self.parse_known_args(argv, namespace)
        if extras:
            sub = subcommands(self).get(str(getattr(ns, "command", "") or ""))
            parser = sub if isinstance(sub, Parser) else self
            parser.error(parser.unrecognized(extras))
        return ns


def build_parser(env: Environment | None = None) -> RootParser:
    """Every command's parser, bound to its function; flag defaults from ``env`` (default: this process's)."""
    from . import execcmd, explain, netfilter, query, reconcile, tools

    root = RootParser(prog="llmtap", description="Observability sidecar for LLM API traffic.")
    root.add_argument("--version", action="version", version=f"llmtap {__version__}")
    commands = Commands(root, env if env is not None else Environment.read())
    registers = (tools, query, explain, reconcile, execcmd, netfilter)
    for module in registers:
        module.register(commands)
    root.env_vars = frozenset(commands.env_vars)
    return root


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-parsers of ``parser`` by command name."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out.update(action.choices)
    return out
