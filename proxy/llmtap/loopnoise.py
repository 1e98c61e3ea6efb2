"""Event-loop errors that repeat by the thousand when the process runs out of descriptors: one line per 10 s.

When ``accept()`` fails with EMFILE, asyncio logs the error once for every connection waiting in the
listen backlog (up to 512 at a time for the admin listener) and tries again a second later; each try
also leaves a retry timer, which fails once more (``Invalid file descriptor``) after the listener
closes. Through mitmproxy's loop handler (``Master.run`` installs its own, replacing any set before)
each became a traceback: tens of megabytes of log a minute. :func:`install` puts :class:`AcceptErrors`
in front of whatever handler a loop has — on a proxy worker's loop once mitmproxy runs, on the admin
server's loop at start — and :data:`ACCEPT_ERRORS`, shared by every loop of the process, lets one
line through per :data:`EVERY_S` seconds, saying how many it held back. Everything else goes to the
handler that was there.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("llmtap.limits")

EVERY_S = 10.0
OUT_OF = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
Handler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]


def is_accept_noise(context: dict[str, Any]) -> bool:
    """An ``accept()`` that failed for want of resources, or asyncio's retry of one after its listener closed."""
    exc = context.get("exception")
    if "out of system resource" in str(context.get("message", "")):
        return True
    if isinstance(exc, OSError) and exc.errno in OUT_OF:
        return True
    return isinstance(exc, (ValueError, OSError)) and "_start_serving" in repr(context.get("handle", ""))


class AcceptErrors:
    """The first accept error, then at most one line per ``every_s`` with the count of those held back."""

    def __init__(self, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.clock = clock
        self.held = 0
        self._last: float | None = None
        self._lock = threading.Lock()  # the proxy's and the admin server's loops run on different threads

    def seen(self, context: dict[str, Any]) -> None:
        with self._lock:
            now = self.clock()
            if self._last is not None and now - self._last < self.every_s:
                self.held += 1
                return
            self._last, held, self.held = now, self.held, 0
        why = context.get("exception") or context.get("message", "")
        log.error("cannot accept connections: %s (%d more like it held back; next report in %.0f s at most)",
                  why, held, self.every_s)  # fmt: skip


ACCEPT_ERRORS = AcceptErrors()


def install(loop: asyncio.AbstractEventLoop, errors: AcceptErrors = ACCEPT_ERRORS) -> None:
    """Accept errors on ``loop`` go to ``errors``; anything else to the handler the loop had (or asyncio's)."""
    previous = loop.get_exception_handler()

    def handler(lp: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if is_accept_noise(context):
            errors.seen(context)
        elif previous is not None:
            previous(lp, context)
        else:
            lp.default_exception_handler(context)

    loop.set_exception_handler(handler)
