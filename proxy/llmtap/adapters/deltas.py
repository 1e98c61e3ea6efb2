"""Content deltas recognized from their bytes: a stream's events that can only add text, without a parse.

Most events of a chat stream are the same JSON object again and again with only its text changed —
``{"id":"chatcmpl-…","object":"chat.completion.chunk",…,"choices":[{"index":0,"delta":{"content":"…"},
"finish_reason":null}],"usage":null,"obfuscation":"…"}`` (OpenAI pads each chunk with a random
``obfuscation`` string), Anthropic's ``{"type":"content_block_delta","index":0,"delta":{"type":"text_delta",
"text":"…"}}``. Once an adapter has parsed one such event in full and found that all it said was
"this text", a :class:`DeltaTemplate` remembers its bytes around the two strings that vary; every later
event whose bytes are that template with other strings in those two places is, to the byte, the same JSON
with another text — so it has the same effect as the parsed one except for the text, and its text is read
without parsing the rest. Anything else (another key, a number that changed, an escape the JSON grammar does
not allow, a control character) does not match, and the event is parsed in full as always.
"""

from __future__ import annotations

import json
import re

_PAD = '"obfuscation":"'
# A JSON string's body as it can appear raw: no quote, no backslash but as an escape, no control character.
_BODY = re.compile(r'(?:[^"\\\x00-\x1f]|\\.)*')
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')


def _text(raw: str) -> str | None:
    """The string a JSON string body ``raw`` stands for; ``None`` if it is not one (JSON would refuse it)."""
    if _PLAIN.fullmatch(raw):
        return raw
    try:
        value = json.loads('"' + raw + '"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


class DeltaTemplate:
    """The bytes of one text-only event around its text and its padding (``obfuscation``, when it has one)."""

    __slots__ = ("after_pad", "after_text", "head")

    def __init__(self, head: str, after_text: str, after_pad: str | None) -> None:
        self.head, self.after_text, self.after_pad = head, after_text, after_pad

    @classmethod
    def learn(cls, data: str, key: str = "content") -> DeltaTemplate | None:
        """The template of ``data``, an event whose whole meaning the caller found to be the text under ``key``;
        ``None`` when its bytes do not have exactly one such string (and at most one padding string after it)."""
        field = f'"{key}":"'
        if data.count(field) != 1 or data.count(_PAD) > 1:
            return None
        start = data.index(field) + len(field)
        end = _BODY.match(data, start)
        if end is None or not data.startswith('"', end.end()):
            return None
        pad = data.find(_PAD, end.end())
        if pad < 0:
            return None if _PAD in data else cls(data[:start], data[end.end() :], None)
        pad_start = pad + len(_PAD)
        pad_end = _BODY.match(data, pad_start)
        if pad_end is None or not data.startswith('"', pad_end.end()):
            return None
        return cls(data[:start], data[end.end() : pad_start], data[pad_end.end() :])

    def match(self, data: str) -> str | None:
        """The text of ``data`` if it is this template with other strings in its places, else ``None``."""
        if not data.startswith(self.head):
            return None
        m = _BODY.match(data, len(self.head))
        if m is None or not data.startswith(self.after_text, m.end()):
            return None
        text = _text(m.group())
        if text is None:
            return None
        if self.after_pad is None:
            return text if len(data) == m.end() + len(self.after_text) else None
        p = _BODY.match(data, m.end() + len(self.after_text))
        if p is None or data[p.end() :] != self.after_pad or _text(p.group()) is None:
            return None
        return text
