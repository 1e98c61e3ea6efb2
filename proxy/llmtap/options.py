"""Flags declared on the fields of a config type (:mod:`llmtap.config`), and how their text reads.

A field declared with :func:`option` is a flag: its default is the field's (the value the program
uses, written once), and :class:`Option` says how it is typed (help, how its text reads, repeatable
or a switch, the OTel variable it falls back to). :func:`flags` lists what a config type declares,
for the parser (:mod:`llmtap.cli.parser`: the flag, its help, its ``LLMTAP_<FLAG>`` variable);
:func:`flag_value` turns what was typed, or set in the environment, into the value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .durations import parse_duration
from .errors import UsageError
from .record import CaptureMode

Address = tuple[str, int]
ENV_PREFIX = "LLMTAP_"
TRUE = frozenset({"1", "true", "yes", "on"})


def env_name(flag: str) -> str:
    """``--spool-max-mb`` → ``LLMTAP_SPOOL_MAX_MB``: the variable every flag also reads."""
    return ENV_PREFIX + flag.lstrip("-").upper().replace("-", "_")


# -- how a flag's text reads: text → value, or ValueError saying what was expected ----------------


def address(text: str) -> Address:
    """``HOST:PORT`` (``[v6]:PORT``); port 0 means any free port where a command allows it."""
    from .intercept.routing import parse_host_port

    try:
        host, port = parse_host_port(text)
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}; expected HOST:PORT, e.g. 127.0.0.1:8080") from None
    if port is None:
        raise ValueError(f"needs HOST:PORT, got {text!r}")
    if not 0 <= port < 65536:
        raise ValueError(f"{text!r}: the port must be 1-65535 (0: any free port, where a command allows it)")
    return host, port


def show_address(value: Address) -> str:
    host, port = value
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def whole(minimum: int, unit: str = "") -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except (TypeError, ValueError):
            value = minimum - 1
        if value < minimum:
            raise ValueError(f"expects a whole number >= {minimum}{unit}, got {text!r}")
        return value

    return parse


def duration(minimum: float = 0.0) -> Callable[[str], float]:
    """A duration (``30s``, ``5m``, or bare seconds) in seconds."""

    def parse(text: str) -> float:
        try:
            seconds = parse_duration(text)
        except ValueError:
            raise ValueError(f"takes a duration like 30s, 15m, 1h or 7d, got {text!r}") from None
        if seconds < minimum:
            raise ValueError(f"must be at least {show_duration(minimum)}")
        return seconds

    return parse


def show_duration(seconds: float) -> str:
    return f"{seconds:g}s"


def optional_path(text: str) -> Path | None:
    return Path(text) if text else None


def show_path(value: Path) -> str:
    return str(value) if value.is_absolute() or str(value).startswith(".") else f"./{value}"


def intercept_host(text: str) -> str:
    """``HOST[:PORT]``, kept as written."""
    from .intercept.routing import parse_host_port

    try:
        parse_host_port(text)
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from None
    return text


def connect_to(text: str) -> tuple[Address, Address]:
    """``HOST:PORT:ADDR:PORT`` → ((host, port), (addr, port))."""
    parts = text.split(":")
    if len(parts) != 4 or not parts[1].isdigit() or not parts[3].isdigit():
        raise ValueError(f"takes HOST:PORT:ADDR:PORT, got {text!r}")
    return (parts[0].lower(), int(parts[1])), (parts[2], int(parts[3]))


@dataclass(frozen=True, slots=True)
class ProxyMode:
    """``--mode``: how clients reach the proxy. ``regular``: ``HTTPS_PROXY`` (CONNECT) and base-URL requests;
    ``transparent``: connections redirected to the listener by netfilter rules (``llmtap netfilter apply``),
    their destination read from the kernel (``SO_ORIGINAL_DST``); ``local[:PROCESS]``: mitmproxy's eBPF
    redirector captures this machine's processes (all, or those named), where the kernel loads it."""

    kind: CaptureMode = "regular"
    processes: str = ""  # local mode: mitmproxy's process spec (names or pids, comma-separated; ``!`` excludes)

    def __str__(self) -> str:
        return f"{self.kind}:{self.processes}" if self.processes else self.kind


def proxy_mode(text: str) -> ProxyMode:
    """``regular``, ``transparent``, ``local`` or ``local:PROCESS[,PROCESS...]``."""
    kind, sep, rest = text.strip().partition(":")
    if kind in ("regular", "transparent") and not sep:
        return ProxyMode(kind)  # type: ignore[arg-type]
    if kind == "local" and (rest.strip() or not sep):
        return ProxyMode("local", rest.strip())
    raise ValueError(f"takes regular, transparent or local[:PROCESS], got {text!r}")


# -- a flag, declared on its field ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Option:
    """How a field of a config type (:class:`llmtap.config.RunConfig`) is given on the command line."""

    help: str
    parse: Callable[[str], Any] | None = None  # text → value; None: the text itself
    show: Callable[[Any], str] = str  # the default, as it would be typed (help)
    default_text: str = ""  # the default as help states it, when it is computed (chdb://<data-dir>/store)
    flag: str = ""  # when the flag is not --<field-name>
    metavar: str | None = None
    repeat: bool = False  # repeatable; its variable takes a comma-separated list
    collect: Callable[[list[Any]], Any] = list  # the repeated values → the field's value
    switch: bool = False  # takes no value; its variable is on when 1, true, yes or on
    fallback: str = ""  # read when LLMTAP_<FLAG> is not set (the OTel variable a flag stands for)


def option(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING, **kw: Any) -> Any:
    """A config field that is a flag: its default (a value, or ``factory`` for a mutable one)
    and :class:`Option`'s settings. The flag is ``--<field-name>`` unless ``flag`` says otherwise."""
    meta = {"option": Option(help, **kw)}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, slots=True)
class Flag:
    """A declared flag of a config type, as the parser and the builder see it."""

    name: str  # the field
    flag: str  # --the-flag
    env: str  # LLMTAP_THE_FLAG
    option: Option
    default: Any

    @property
    def default_help(self) -> str:
        """The default as ``--help`` states it ('' when there is none to state)."""
        if self.option.default_text:
            return self.option.default_text
        if self.option.switch or self.option.repeat or self.default is None or self.default == "":
            return ""
        return self.option.show(self.default)


def flags(cls: type) -> list[Flag]:
    """The flags a config type declares, in declaration order."""
    out = []
    for f in dataclasses.fields(cls):
        opt = f.metadata.get("option")
        if opt is None:
            continue
        flag = opt.flag or "--" + f.name.replace("_", "-")
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out.append(Flag(f.name, flag, env_name(flag), opt, default))
    return out


def items(text: str) -> list[str]:
    """A comma-separated list (a repeatable flag's variable)."""
    return [x.strip() for x in text.split(",") if x.strip()] if text else []


def flag_value(f: Flag, given: Any, env: Mapping[str, str]) -> Any:
    """A flag's value: typed on the command line (``given``), else its variable, else its default.
    A text that does not read is a :class:`~llmtap.errors.UsageError`: ``--flag <why>[ (from $VAR)]``."""
    opt = f.option

    def read(text: str, source: str) -> Any:
        if opt.parse is None:
            return text
        try:
            return opt.parse(text)
        except ValueError as e:
            raise UsageError(f"{f.flag} {e}{source}") from None

    if opt.switch:
        return bool(given) or str(env.get(f.env, "")).lower() in TRUE
    if opt.repeat:
        texts = [(t, f" (from ${f.env})") for t in items(env.get(f.env, ""))] + [(t, "") for t in given or []]
        return opt.collect([read(t, s) for t, s in texts]) if texts else f.default
    if given is not None:
        return read(given, "")
    if f.env in env:
        return read(env[f.env], f" (from ${f.env})")
    if opt.fallback and opt.fallback in env:
        return read(env[opt.fallback], f" (from ${opt.fallback})")
    return f.default
