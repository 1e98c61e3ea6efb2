"""Interception: the event-loop side, and the only package that imports mitmproxy.

:mod:`.addon` (flows → captures), :mod:`.mitm` (the proxy's addons and loop), :mod:`.ca`
(the interception CA and trust bundles), :mod:`.attribution` (who made a call, which key
paid), :mod:`.routing` (what is decrypted, base-URL mode). mitmproxy itself is imported
only by :mod:`.addon`, :mod:`.mitm` and :mod:`.ca`, and only when they are.
"""

from __future__ import annotations

from .attribution import Fingerprinter
from .routing import allow_host_patterns, parse_host_port

__all__ = ["Fingerprinter", "allow_host_patterns", "parse_host_port"]
