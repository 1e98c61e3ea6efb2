"""Content deltas recognized from their bytes: a stream's events that can only add text, without a parse.

Most events of a stream are the same JSON object again and again with only its text changed — OpenAI's
``{"id":"chatcmpl-…","object":"chat.completion.chunk",…,"choices":[{"index":0,"delta":{"content":"…"},
"finish_reason":null}],"usage":null,"obfuscation":"…"}`` (each chunk padded with a random ``obfuscation``
string), Anthropic's ``{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"…"}}``,
the Responses API's ``{"type":"response.output_text.delta",…,"delta":"…",…,"obfuscation":"…",…,
"sequence_number":7}``. Once an adapter has parsed one such event in full and found that all it said was
"this text", a :class:`DeltaTemplate` remembers its bytes around the values that vary (the text; a padding
string; a sequence number, all of which the adapter ignores); every later event whose bytes are that
template with other values in those places is, to the byte, the same JSON with another text — so it has
the same effect as the parsed one except for the text, and its text is read without parsing the rest.
Anything else (another key, another number, an escape the JSON grammar does not allow, a control
character) does not match, and the event is parsed in full as always.
"""

from __future__ import annotations

import json
import re

PADDING = ("obfuscation",)  # string values an adapter never reads
COUNTERS = ("sequence_number",)  # integer values an adapter never reads
# A JSON string's body as it can appear raw: no quote, no backslash but as an escape, no control character.
_BODY = re.compile(r'(?:[^"\\\x00-\x1f]|\\.)*')
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")


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
    """The bytes of one text-only event between the places of the values that vary (its text, and whatever
    padding strings and counters it has), in the order they come."""

    __slots__ = ("holes", "segments", "text_hole")

    def __init__(self, segments: tuple[str, ...], holes: tuple[bool, ...], text_hole: int) -> None:
        self.segments = segments  # len(holes) + 1 pieces of bytes around the holes
        self.holes = holes  # per hole: True a JSON string (the text or a padding), False an integer
        self.text_hole = text_hole  # which hole is the text

    @classmethod
    def learn(cls, data: str, key: str = "content") -> DeltaTemplate | None:
        """The template of ``data``, an event whose whole meaning the caller found to be the text under ``key``;
        ``None`` when its bytes do not have exactly one such string, or repeat a padding or counter."""
        spots: list[tuple[int, int, bool]] = []  # (value start, value end, is a string)
        for name, is_string in ((key, True), *((p, True) for p in PADDING), *((c, False) for c in COUNTERS)):
            field = f'"{name}":"' if is_string else f'"{name}":'
            count = data.count(field)
            if count > 1 or (count == 0 and name == key):
                return None
            if count == 0:
                continue
            start = data.index(field) + len(field)
            m = (_BODY if is_string else _INT).match(data, start)
            if m is None or (is_string and not data.startswith('"', m.end())):
                return None
            spots.append((start, m.end(), is_string))
        text_start = spots[0][0]
        spots.sort()
        segments, pos = [], 0
        for start, end, _ in spots:
            segments.append(data[pos:start])
            pos = end
        segments.append(data[pos:])
        text_hole = next(i for i, (start, _, _) in enumerate(spots) if start == text_start)
        return cls(tuple(segments), tuple(s for _, _, s in spots), text_hole)

    def match(self, data: str) -> str | None:
        """The text of ``data`` if it is this template with other values in its places, else ``None``."""
        segs = self.segments
        if not data.startswith(segs[0]):
            return None
        pos, text = len(segs[0]), None
        for i, is_string in enumerate(self.holes):
            m = (_BODY if is_string else _INT).match(data, pos)
            if m is None or not data.startswith(segs[i + 1], m.end()):
                return None
            if is_string:
                value = _text(m.group())
                if value is None:
                    return None
                if i == self.text_hole:
                    text = value
            pos = m.end() + len(segs[i + 1])
        return text if pos == len(data) else None
