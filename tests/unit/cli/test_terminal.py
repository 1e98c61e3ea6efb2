"""Text for a terminal: every control character, bidi override and non-UTF-8 byte escaped; the rest kept."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmtap.cli.query import format_table
from llmtap.cli.terminal import escape, one_line, safe_bytes


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain model-4.1 ü日本 😀", "plain model-4.1 ü日本 😀"),
        ("a\x1b[31mred", "a\\x1b[31mred"),
        ("bell\x07 nul\x00 bs\x08 cr\r del\x7f", "bell\\x07 nul\\x00 bs\\x08 cr\\x0d del\\x7f"),
        ("\x1b]8;;https://evil.example\x07link\x1b]8;;\x07", "\\x1b]8;;https://evil.example\\x07link\\x1b]8;;\\x07"),
        ("c1 \u009b31m \u0085", "c1 \\x9b31m \\x85"),
        ("bidi \u202eevil\u202c \u2066x\u2069 \u200f", "bidi \\u202eevil\\u202c \\u2066x\\u2069 \\u200f"),
        ("line\u2028sep", "line\\u2028sep"),
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
    ],
)
def test_escape(raw: str, shown: str) -> None:
    assert escape(raw) == shown
    shown.encode("utf-8")  # printable on any UTF-8 terminal


def test_one_line_and_bytes() -> None:
    assert one_line("a\nb\tc\x1b") == "a\\x0ab\\x09c\\x1b"
    assert safe_bytes(b"ok \xff\xfe \x1b[2J \xe2\x80\xae") == b"ok \\xff\\xfe \\x1b[2J \\u202e"
    assert safe_bytes("ü日本".encode()) == "ü日本".encode()


def test_tables_escape_their_cells() -> None:
    table = format_table(["model", "n"], [["gpt\x1b[2J\nx", "1"]])
    assert "\x1b" not in table and "gpt\\x1b[2J\\x0ax" in table and table.count("\n") == 2


@given(st.text())
def test_nothing_unsafe_survives(text: str) -> None:
    out = escape(text)
    for ch in out:
        bidi = "\u202a\u202b\u202c\u202d\u202e"
        assert ch in "\t\n" or (unicodedata.category(ch) not in ("Cc", "Cs") and ch not in bidi)
    out.encode("utf-8")
