"""Fault injection for chaos tests: ``LLMTAP_FAULT_INJECT=adapter,sink``.

- ``adapter``: every adapter raises on each event and body it is given (the side parser
  must stop for that call, count it, and leave the bytes alone);
- ``sink``: an extra record sink that always raises (records must still reach the store).

Off unless the variable is set; it exists so that fail-open behaviour is tested on the
real process, not on a mock of it.
"""

from __future__ import annotations

import os
from typing import Any

from .adapters.base import Adapter
from .record import CallRecord


class InjectedFault(RuntimeError):
    pass


_ENABLED = frozenset(x.strip() for x in os.environ.get("LLMTAP_FAULT_INJECT", "").split(",") if x.strip())


def enabled(name: str) -> bool:
    return name in _ENABLED  # read once at start: this is asked on every request


def _raise(*_: Any) -> None:
    raise InjectedFault("injected adapter fault")


def maybe_break(adapter: Adapter) -> Adapter:
    if _ENABLED and enabled("adapter"):
        setattr(adapter, "on_event", _raise)  # noqa: B010 - replacing a bound method on purpose
        setattr(adapter, "on_json", _raise)  # noqa: B010
    return adapter


def failing_sink(r: CallRecord) -> None:
    raise InjectedFault("injected sink fault")
