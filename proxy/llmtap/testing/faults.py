"""Fault injection for chaos tests: ``LLMTAP_FAULT_INJECT=adapter,sink``.

- ``adapter``: every adapter raises on each event and body it is given (the side parser
  must stop for that call, count it, and leave the bytes alone);
- ``sink``: an extra record sink that always raises (records must still reach the store).

Off unless the variable is set; it exists so that fail-open behaviour is tested on the
real process, not on a mock of it. Wired by the composition root (:mod:`llmtap.app`) only:
nothing on the traffic path imports this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..adapters import Adapter
from ..record import CallRecord


class InjectedFault(RuntimeError):
    pass


def enabled(name: str) -> bool:
    return name in {x.strip() for x in os.environ.get("LLMTAP_FAULT_INJECT", "").split(",") if x.strip()}


def _raise(*_: Any) -> None:
    raise InjectedFault("injected adapter fault")


def adapter_factory() -> Callable[[type[Adapter]], Adapter] | None:
    """Builds adapters whose stream and body hooks raise, when ``adapter`` faults are on."""
    if not enabled("adapter"):
        return None

    def make(cls: type[Adapter]) -> Adapter:
        adapter = cls()
        for hook in ("on_event", "on_json", "on_object", "on_frame"):
            setattr(adapter, hook, _raise)
        return adapter

    return make


class FailingSink:
    def emit(self, record: CallRecord) -> None:
        raise InjectedFault("injected sink fault")

    def flush(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        pass


def sinks() -> list[Any]:
    return [FailingSink()] if enabled("sink") else []
