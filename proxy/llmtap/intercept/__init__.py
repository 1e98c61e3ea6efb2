"""Interception: the proxy worker processes, and the only package that imports mitmproxy.

:mod:`.worker` (the process), :mod:`.addon` (flows → :mod:`llmtap.handoff` messages, through
:mod:`.calls` and :mod:`.outbox`), :mod:`.mitm` (the proxy's addons and loop), :mod:`.ca`
(the interception CA and trust bundles), :mod:`.attribution` (who made a call, which key
paid), :mod:`.routing` (what is decrypted, base-URL mode). mitmproxy itself is imported
only by :mod:`.addon`, :mod:`.websocket`, :mod:`.mitm` and :mod:`.ca`, and only when they are.
"""

from __future__ import annotations

from .attribution import Fingerprinter
from .routing import allow_host_patterns, parse_host_port

__all__ = ["Fingerprinter", "allow_host_patterns", "parse_host_port"]
