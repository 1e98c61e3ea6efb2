"""NDJSON, streamed-JSON-array and AWS event-stream decoders: chunking invariance and garbage tolerance."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmtap.decode import EventStreamDecoder, EventStreamError, JSONArrayDecoder, NDJSONDecoder, encode_event

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)
objects = st.lists(st.dictionaries(st.text(max_size=8), values, max_size=5), max_size=8)


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@pytest.mark.slow  # hundreds of examples: with the e2e suite, off the fast unit loop
@pytest.mark.e2e
@settings(max_examples=200, deadline=None)
@given(objects, st.lists(st.integers(0, 5000), max_size=20), st.sampled_from(["\n", "\r\n"]))
def test_ndjson_any_chunking(objs: list[dict[str, object]], cuts: list[int], eol: str) -> None:
    data = "".join(json.dumps(o) + eol for o in objs).encode()
    d = NDJSONDecoder()
    out = [x for p in pieces(data, cuts) for x in d.feed(p)] + d.flush()
    assert out == objs


@pytest.mark.slow  # hundreds of examples: with the e2e suite, off the fast unit loop
@pytest.mark.e2e
@settings(max_examples=200, deadline=None)
@given(objects, st.lists(st.integers(0, 5000), max_size=20))
def test_json_array_any_chunking(objs: list[dict[str, object]], cuts: list[int]) -> None:
    data = ("[" + ",\r\n".join(json.dumps(o) for o in objs) + "]").encode()
    d = JSONArrayDecoder()
    assert [x for p in pieces(data, cuts) for x in d.feed(p)] == objs


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.text(min_size=1, max_size=12), st.binary(max_size=300)), max_size=6),
    st.lists(st.integers(0, 5000), max_size=20),
)
def test_event_stream_any_chunking(events: list[tuple[str, bytes]], cuts: list[int]) -> None:
    data = b"".join(encode_event({":message-type": "event", ":event-type": name}, payload) for name, payload in events)
    d = EventStreamDecoder()
    out = [m for p in pieces(data, cuts) for m in d.feed(p)]
    assert [(m.event_type, m.payload) for m in out] == events


def test_event_stream_crc_is_checked() -> None:
    good = encode_event({":message-type": "event", ":event-type": "chunk"}, b'{"a":1}')
    bad = good[:-1] + bytes([good[-1] ^ 1])
    with pytest.raises(EventStreamError, match="CRC"):
        EventStreamDecoder().feed(bad)
    prelude_bad = struct.pack(">II", len(good), 0) + struct.pack(">I", zlib.crc32(b"x")) + good[12:]
    with pytest.raises(EventStreamError):
        EventStreamDecoder().feed(prelude_bad)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(0, 3000), max_size=10))
def test_garbage_never_raises_anything_unexpected(data: bytes, cuts: list[int]) -> None:
    nd, ja, es = NDJSONDecoder(max_bytes=1024), JSONArrayDecoder(max_bytes=1024), EventStreamDecoder()
    es_ok = True
    for p in pieces(data, cuts):
        nd.feed(p)
        ja.feed(p)
        assert len(nd._buf) <= 1024 + len(p) and len(ja._buf) <= 1024 + len(p)
        if es_ok:
            try:
                es.feed(p)
            except EventStreamError:
                es_ok = False  # a corrupt frame stops decoding: the capture layer stops parsing that call


def test_websocket_messages_decode_json_and_pass_the_rest() -> None:
    from llmtap.decode import WSMessageDecoder

    d = WSMessageDecoder(max_bytes=64)
    assert d.feed(b'{"type":"response.done","x":"caf\xc3\xa9"}') == [
        ({"type": "response.done", "x": "café"}, '{"type":"response.done","x":"café"}')
    ]
    assert d.feed(b"\xff\xfe audio") == [] and d.feed(b"not json") == [] and d.undecodable == 2
    assert d.feed(b'{"a":"' + b"x" * 100 + b'"}') == [] and d.oversized == 1
    assert d.flush() == []


@given(st.binary(max_size=300))
def test_websocket_decoder_never_raises(data: bytes) -> None:
    from llmtap.decode import WSMessageDecoder

    for _, text in WSMessageDecoder().feed(data):
        assert text.encode() == data  # a decoded message is exactly the bytes it came from
