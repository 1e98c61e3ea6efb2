"""``--mode local``: what mitmproxy's Linux redirector says, turned into one line when it gives up.

mitmproxy starts the redirector (``mitmproxy-linux-redirector``, through ``sudo --non-interactive`` even when
already root) and returns at once; the redirector then loads its eBPF programs. On a kernel that refuses them
(no BTF, no cgroup socket programs) it prints the reason on its stderr, which mitmproxy logs line by line, and
exits — and the proxy would go on running while capturing nothing. :class:`RedirectorWatch` reads those lines
and, when the redirector exits, hands the reason on as one line (the worker stops; the sidecar exits 2).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

LOGGER = "mitmproxy.packet_sources.linux"
_CAUSE = re.compile(r"^\s+\d+: (.+)$")


class RedirectorWatch(logging.Handler):
    def __init__(self, on_exit: Callable[[str], None]) -> None:
        super().__init__(logging.DEBUG)
        self._on_exit = on_exit
        self._error: list[str] = []
        self._in_causes = False
        self.reason = ""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:
            return
        if text.startswith("Error: "):
            self._error, self._in_causes = [text.removeprefix("Error: ").strip()], False
        elif text.strip() == "Caused by:":
            self._in_causes = True
        elif text.startswith("Stack backtrace"):
            self._in_causes = False
        elif self._in_causes and (m := _CAUSE.match(text)):
            self._error.append(m.group(1).strip())
        elif "[linux-redirector] exited" in text:
            why = ": ".join(self._error) or text.strip()
            self.reason = (
                f"--mode local: mitmproxy's redirector stopped ({why}); local capture needs a kernel that loads "
                "its eBPF programs (BTF, cgroup socket programs) and root: use --mode transparent instead"
            )
            self._on_exit(self.reason)


def watch(on_exit: Callable[[str], None]) -> RedirectorWatch:
    handler = RedirectorWatch(on_exit)
    logging.getLogger(LOGGER).addHandler(handler)
    return handler
