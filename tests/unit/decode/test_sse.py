"""The SSE decoder against the WHATWG rules, and chunking invariance (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llmtap.decode.sse import SSEDecoder, SSEEvent


def decode(*chunks: bytes) -> list[SSEEvent]:
    d = SSEDecoder()
    out: list[SSEEvent] = []
    for c in chunks:
        out += d.feed(c)
    return out


def test_basic_and_event_names() -> None:
    assert decode(b"event: a\ndata: 1\n\ndata: 2\n\n") == [SSEEvent("a", "1"), SSEEvent("message", "2")]


def test_line_endings_cr_lf_crlf_mixed() -> None:
    want = [SSEEvent("message", "x"), SSEEvent("message", "y"), SSEEvent("message", "z")]
    assert decode(b"data: x\r\n\r\ndata: y\r\rdata: z\n\n") == want


def test_cr_and_lf_split_across_chunks_is_one_line_ending() -> None:
    # "data: a\r" | "\ndata: b\r" | "\n\r" | "\n": CRLF split must not create blank lines.
    assert decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [SSEEvent("message", "a\nb")]


def test_comments_are_ignored_and_counted() -> None:
    d = SSEDecoder()
    assert d.feed(b": OPENROUTER PROCESSING\n\n:keep-alive\ndata: 1\n\n") == [SSEEvent("message", "1")]
    assert d.comments == 2


def test_multiline_data_and_no_space_after_colon() -> None:
    assert decode(b"data:a\ndata:  b\ndata\n\n") == [SSEEvent("message", "a\n b\n")]


def test_bom_is_stripped_even_when_split() -> None:
    assert decode(b"\xef", b"\xbb", b"\xbfdata: x\n\n") == [SSEEvent("message", "x")]
    assert decode(b"\xef\xbb\xbfdata: y\n\n") == [SSEEvent("message", "y")]


def test_utf8_split_inside_a_character() -> None:
    raw = "data: naïve 日本\n\n".encode()
    cut = raw.index("日".encode()) + 1
    assert decode(raw[:cut], raw[cut:]) == [SSEEvent("message", "naïve 日本")]


def test_empty_data_dispatches_nothing_and_id_persists() -> None:
    d = SSEDecoder()
    assert d.feed(b"event: x\n\nid: 7\ndata: a\n\ndata: b\n\n") == [
        SSEEvent("message", "a", "7"),
        SSEEvent("message", "b", "7"),
    ]


def test_unterminated_event_is_not_dispatched() -> None:
    assert decode(b"data: partial\n") == []


def test_oversized_line_is_dropped_and_decoder_recovers() -> None:
    d = SSEDecoder(max_event_bytes=1024)
    out = d.feed(b"data: " + b"x" * 5000)
    out += d.feed(b"yyy\n\ndata: ok\n\n")
    assert out == [SSEEvent("message", "ok")]
    assert d.oversized == 1
    assert len(d._buf) < 1024


def test_oversized_multiline_event_is_dropped() -> None:
    d = SSEDecoder(max_event_bytes=100)
    out = d.feed(b"".join(b"data: " + b"z" * 40 + b"\n" for _ in range(10)) + b"\ndata: fine\n\n")
    assert out == [SSEEvent("message", "fine")]


events_st = st.lists(
    st.tuples(
        st.sampled_from(["", "message_start", "error", "response.output_text.delta"]),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=40),
        st.integers(0, 2),
    ),
    min_size=0,
    max_size=12,
)


def render(events: list[tuple[str, str, int]], eol: bytes) -> bytes:
    out = b""
    for name, data, comments in events:
        out += b": ping" + eol if comments else b""
        if name:
            out += b"event: " + name.encode() + eol
        out += b"data: " + data.encode() + eol + eol
    return out


@settings(max_examples=300, deadline=None)
@given(events=events_st, eol=st.sampled_from([b"\n", b"\r\n", b"\r"]), cuts=st.lists(st.integers(0, 4000)))
def test_any_chunking_yields_the_same_events(events: list[tuple[str, str, int]], eol: bytes, cuts: list[int]) -> None:
    raw = render(events, eol)
    whole = decode(raw)
    points = sorted({c % (len(raw) + 1) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert decode(*pieces) == whole
    assert decode(*[raw[i : i + 1] for i in range(len(raw))]) == whole
    # and the decoded events are what was encoded (empty data dispatches nothing, per WHATWG)
    assert [(e.event, e.data) for e in whole] == [(n or "message", d) for n, d, _ in events]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(0, 3000), max_size=20))
def test_garbage_never_raises_and_memory_stays_bounded(data: bytes, cuts: list[int]) -> None:
    d = SSEDecoder(max_event_bytes=512)
    points = sorted({c % (len(data) + 1) for c in cuts})
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        d.feed(data[a:b])
        assert len(d._buf) <= 512 + (b - a)


def test_bare_json_line_is_an_event() -> None:
    raw = b'data: {"a":1}\n\n{"error": {"code": 500, "status": "INTERNAL"}}\n'
    assert decode(raw) == [
        SSEEvent("message", '{"a":1}'),
        SSEEvent("message", '{"error": {"code": 500, "status": "INTERNAL"}}'),
    ]


class LineByLine(SSEDecoder):
    """The decoder without its whole-events fast path: every chunk parsed line by line."""

    def _idle(self) -> bool:
        return False


@settings(max_examples=400, deadline=None)
@given(
    events=events_st,
    ids=st.lists(st.sampled_from([b"", b"id: 7\n", b"data: two\n", b":c\n", b'{"a":1}\n', b"\n"]), max_size=12),
    at_events=st.booleans(),
    cuts=st.lists(st.integers(0, 4000), max_size=8),
)
def test_the_whole_events_fast_path_is_the_line_parser(
    events: list[tuple[str, str, int]], ids: list[bytes], at_events: bool, cuts: list[int]
) -> None:
    """Chunks of whole events (as servers flush them) take the fast path; every event, the last event id,
    and the counters are what the line parser makes of the same bytes."""
    blocks = [render([e], b"\n") for e in events]
    blocks = [ids[i % len(ids)] + b for i, b in enumerate(blocks)] if ids else blocks
    raw = b"".join(blocks)
    if at_events:  # cut at event boundaries: the fast path's case
        bounds = [0]
        for b in blocks:
            bounds.append(bounds[-1] + len(b))
        points = sorted({bounds[c % len(bounds)] for c in cuts})
    else:
        points = sorted({c % (len(raw) + 1) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    fast, slow = SSEDecoder(max_event_bytes=64), LineByLine(max_event_bytes=64)
    got = [e for p in pieces for e in fast.feed(p)] + fast.flush()
    want = [e for p in pieces for e in slow.feed(p)] + slow.flush()
    assert got == want
    state = ("lines", "comments", "oversized", "_id")
    assert [getattr(fast, k) for k in state] == [getattr(slow, k) for k in state]
