"""llmtap's own errors: one base class, as httpx has ``HTTPError``.

Every error llmtap raises about its input or its setup derives from :class:`LlmtapError` and
says in one line what went wrong and what to change. The CLI (:func:`llmtap.cli.main`) prints
any of them as ``llmtap <command>: <message>`` and exits 2; nothing else is printed, no
traceback. Errors that are not llmtap's (a bug, an OS error nobody foresaw) are not caught
there: they keep their traceback.

The classes that the CLI's start-up path raises itself live here; the others live beside the
code that raises them (:class:`llmtap.store.StoreURLError`, :class:`llmtap.admin.QueryRefused`,
:class:`llmtap.telemetry.PriceFileError`, …) and derive from the same base. Most also derive
from ``ValueError``, as they did before there was a base: code that catches ``ValueError``
keeps working.
"""

from __future__ import annotations


class LlmtapError(Exception):
    """The base of every error llmtap raises about its input or setup (one line: what and how to fix it)."""


class UsageError(LlmtapError):
    """A bad flag value or command line."""


class StartupError(LlmtapError, ValueError):
    """A configuration the sidecar cannot start with: one line, naming the flag and the fix."""


class ConfigError(StartupError):
    """Flags that contradict each other or the deployment (an open proxy, a store that receives nothing)."""


__all__ = ["ConfigError", "LlmtapError", "StartupError", "UsageError"]
