"""What the read commands write for a person to read: stored values are anyone's text (:mod:`llmtap.safetext`).

``llmtap sql`` escapes its output when stdout is a terminal (piped or redirected, it writes the
engine's bytes verbatim: that is data); ``report``, ``check-cost``, ``reconcile`` and the explain
commands always do (their output is text for reading); error messages from a store or a sidecar
are escaped to one line.
"""

from __future__ import annotations

from ..safetext import escape, one_line


def safe_bytes(data: bytes) -> bytes:
    """Output bytes for a terminal: UTF-8 kept (escaped where unsafe), any other byte shown as ``\\xNN``."""
    return escape(data.decode("utf-8", "backslashreplace")).encode("utf-8")


__all__ = ["escape", "one_line", "safe_bytes"]
