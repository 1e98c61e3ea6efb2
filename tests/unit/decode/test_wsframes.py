"""The side parser of a relayed WebSocket direction: whole messages within bounds, whatever the peer sends."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmtap.decode.body import Bytes
from llmtap.decode.wsframes import Closed, GaveUp, Message, MessageReader, Unparsed
from llmtap.testing.rawws import MIB, FrameWriter, deflate_bomb


def read_all(r: MessageReader, data: bytes, chunk: int = 65536, step: int = 256 * 1024) -> list[object]:
    out: list[object] = []
    for i in range(0, len(data), chunk):
        r.feed(data[i : i + chunk])
        out += r.drain(step)
    while r.pending():
        out += r.drain(step)
    return out


def test_messages_fragments_and_control_frames_any_chunking() -> None:
    w = FrameWriter(masked=True, deflate=True)
    wire = (
        w.text('{"type":"a"}' * 50)
        + w.frame(2, b"\x00bin")
        + w.frame(1, b"frag", fin=False)
        + w.frame(9, b"ping")  # a control frame between two fragments
        + w.frame(0, b"ment")
        + w.text("after")
        + w.close(1001)
    )
    expected = [
        Message(True, b'{"type":"a"}' * 50),
        Message(False, b"\x00bin"),
        Message(True, b"fragment"),
        Message(True, b"after"),
        Closed(1001, ""),
    ]
    for chunk in (1, 3, 7, 64, len(wire)):
        assert read_all(MessageReader(MIB, deflate=True), wire, chunk, step=5) == expected


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=8), st.integers(1, 50), st.booleans())
def test_any_messages_any_chunking_any_budget(payloads: list[bytes], chunk: int, masked: bool) -> None:
    w = FrameWriter(masked=masked, deflate=True)
    wire = b"".join(w.text(p.hex()) for p in payloads)
    got = read_all(MessageReader(MIB, deflate=True), wire, chunk, step=chunk)
    assert got == [Message(True, p.hex().encode()) for p in payloads]


def test_an_uncompressed_message_over_the_bound_is_counted_not_held() -> None:
    w = FrameWriter(masked=True, deflate=False)
    big = b"".join(w.hostile("fragments", 4))  # 4 MiB in 1 MiB fragments
    r = MessageReader(MIB)
    got = read_all(r, big + w.text("next"))
    assert got == [Unparsed(4 * MIB, "message over 1,048,576 bytes: relayed, not parsed"), Message(True, b"next")]


@pytest.mark.parametrize("reset", [False, True])
def test_a_deflate_bomb_is_never_inflated_whole(reset: bool) -> None:
    """1 GiB in ~1 MB: no step produces more than its budget; with the context carried over it is
    inflated (and dropped) up to max_inflate, then the direction is given up; without it, it is skipped."""
    w = FrameWriter(masked=False, deflate=True)
    wire = w.frame(2, deflate_bomb(1024), rsv1=True) + w.text("after") + w.close()
    budget = Bytes(16 * MIB)
    r = MessageReader(8 * MIB, deflate=True, reset_context=reset, max_inflate=32 * MIB, budget=budget)
    got = read_all(r, wire)
    if reset:
        assert got == [Unparsed(len(deflate_bomb(1024)), "message over 8,388,608 bytes: relayed, not parsed"),
                       Message(True, b"after"), Closed(1000, "")]  # fmt: skip
    else:
        assert got == [GaveUp("a compressed message inflates past 32 MiB"), Closed(1000, "")]
    assert budget.used == 0 and not r.pending()


def test_an_oversized_message_with_context_takeover_keeps_the_next_ones_readable() -> None:
    w = FrameWriter(masked=True, deflate=True)
    wire = w.text("first " * 10) + b"".join(w.hostile("deflate", 16)) + w.text("first again " * 10)
    got = read_all(MessageReader(MIB, deflate=True), wire)
    assert got[0] == Message(True, b"first " * 10) and isinstance(got[1], Unparsed)
    assert got[2] == Message(True, b"first again " * 10)


def test_the_shared_budget_bounds_many_readers_together() -> None:
    budget = Bytes(3 * MIB)
    w = FrameWriter(masked=False, deflate=False)
    one = w.frame(2, bytes(2 * MIB), fin=False)  # a message that never ends, in each of two readers
    a, b = MessageReader(8 * MIB, budget=budget), MessageReader(8 * MIB, budget=budget)
    assert read_all(a, one) == [] and budget.used == 2 * MIB  # held: its end may come
    got = read_all(b, one + w.frame(0, b"end"))
    assert got == [Unparsed(2 * MIB + 3, "the side parser's shared buffer is full: relayed, not parsed")]
    assert budget.used == 2 * MIB
    a.close()
    b.close()
    assert budget.used == 0


@pytest.mark.parametrize(
    "wire",
    [
        bytes([0x80, 0x00]),  # a continuation with no message
        bytes([0xC1, 0x00]),  # RSV1 without permessage-deflate
        bytes([0x83, 0x00]),  # a reserved opcode
        bytes([0x09, 0x00]),  # a fragmented ping
        bytes([0x01, 0x01, 0x61, 0x81, 0x00]),  # a new message inside an unfinished one
    ],
)
def test_a_stream_that_is_not_websocket_is_given_up(wire: bytes) -> None:
    r = MessageReader(MIB)
    got = read_all(r, wire + FrameWriter(False, False).text("later"))
    assert len(got) == 1 and isinstance(got[0], GaveUp) and "not a valid WebSocket stream" in got[0].why


def test_bad_deflate_data_is_given_up() -> None:
    w = FrameWriter(masked=False, deflate=True)
    got = read_all(MessageReader(MIB, deflate=True), w.frame(1, b"\xff\xff\xff\xff", rsv1=True))
    assert len(got) == 1 and isinstance(got[0], GaveUp)


def test_output_zlib_still_holds_when_the_budget_ends_is_not_lost() -> None:
    """zlib can keep output back with all its input consumed: a step ending there goes on next time."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    payload = c.compress(bytes(100_000)) + c.flush(zlib.Z_SYNC_FLUSH)
    wire = FrameWriter(False, True).frame(2, payload[:-4], rsv1=True)
    for step in (10, 257, 1000):
        assert read_all(MessageReader(MIB, deflate=True), wire, step=step) == [Message(False, bytes(100_000))]
