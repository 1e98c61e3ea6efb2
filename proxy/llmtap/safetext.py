"""Text from peers made safe to carry and to show, once for every output.

Two jobs, both pure and dependency-free (proxy workers import this leaf module):

- **Carry** (:func:`safe_text`): mitmproxy hands header bytes that are not UTF-8 over as surrogate
  escapes (``\\udcff`` for 0xff), and a JSON body can carry a lone surrogate (``"\\ud800"``); neither
  encodes as UTF-8, so the OTLP exporter, a ``/metrics`` scrape or a log line that meets one fails.
  :func:`safe_text` replaces each by U+FFFD.
- **Show** (:func:`escape`, :func:`one_line`): model names, attribution headers, error messages and ids
  come from applications and upstreams. Shown raw, ESC, BEL, NUL, CR and their kin move a terminal's
  cursor, retitle it, hide or rewrite lines or plant a hyperlink (OSC 8); bidirectional overrides make
  text read otherwise than it is (``\\u202e``); a lone surrogate cannot be encoded at all. :func:`escape`
  shows every C0 control (but tab and newline), DEL, C1 control, bidi embedding, override, isolate and
  mark, line and paragraph separator and lone surrogate as ``\\xNN`` / ``\\uNNNN``; :func:`one_line`
  escapes tab and newline too. The terminal (:mod:`llmtap.cli.terminal`) and the alert webhooks
  (:mod:`llmtap.alerts.slack`) use them.
"""

from __future__ import annotations

import re


def safe_text(v: str) -> str:
    """``v`` as valid UTF-8 can carry it: escaped bytes and lone surrogates become U+FFFD (a pair stays
    the character it stands for)."""
    if v.isascii():
        return v
    try:
        return v.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that is not an escaped byte
        return v.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


_CLASS = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f{_CLASS}]")
_UNSAFE_LINE = re.compile(f"[\x00-\x1f{_CLASS}]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def escape(text: str) -> str:
    """``text`` with every control character escaped (tab and newline kept)."""
    return _UNSAFE.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` escaped to a single line (newlines and tabs escaped too)."""
    return _UNSAFE_LINE.sub(_escape, text)
