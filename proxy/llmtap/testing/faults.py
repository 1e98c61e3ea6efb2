"""Fault injection for chaos tests: ``LLMTAP_FAULT_INJECT=adapter,sink,tee_delay``.

- ``adapter``: every adapter raises on each event and body it is given (the side parser
  must stop for that call, count it, and leave the bytes alone);
- ``sink``: an extra record sink that always raises (records must still reach the store);
- ``tee_delay``: every event and body the tee hands to an adapter first waits
  ``$LLMTAP_FAULT_TEE_DELAY_MS`` (default 2) on the event loop — slow code of llmtap's own,
  which the self-overhead measure (``overhead_ms``, ``llmtap_overhead_seconds``) must show.

Off unless the variable is set (read with the rest of the environment, :class:`llmtap.config.Environment`);
it exists so that fail-open behaviour is tested on the real process, not on a mock of it. Wired by the
composition root (:mod:`llmtap.app`) only: nothing on the traffic path imports this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Set
from typing import Any

from ..adapters import Adapter
from ..record import CallRecord


class InjectedFault(RuntimeError):
    pass


def _raise(*_: Any) -> None:
    raise InjectedFault("injected adapter fault")


HOOKS = ("on_event", "on_json", "on_object", "on_frame")  # what the tee hands frames to


def _delayed(hook: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    def slow(*args: Any) -> Any:
        time.sleep(seconds)
        return hook(*args)

    return slow


def adapter_factory(faults: Set[str], delay: float) -> Callable[[type[Adapter]], Adapter] | None:
    """Builds adapters whose stream and body hooks raise (``adapter``) or wait ``delay`` seconds (``tee_delay``)."""
    failing, slow = "adapter" in faults, "tee_delay" in faults
    if not failing and not slow:
        return None

    def make(cls: type[Adapter]) -> Adapter:
        adapter = cls()
        for hook in HOOKS:
            if failing:
                setattr(adapter, hook, _raise)
            elif hasattr(adapter, hook):
                setattr(adapter, hook, _delayed(getattr(adapter, hook), delay))
        return adapter

    return make


class FailingSink:
    def emit(self, record: CallRecord) -> None:
        raise InjectedFault("injected sink fault")

    def flush(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        pass


def sinks(faults: Set[str]) -> list[Any]:
    return [FailingSink()] if "sink" in faults else []
