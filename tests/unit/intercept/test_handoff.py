"""The handoff between a proxy worker and the recorder: frames survive any split, large request bodies go in
parts and are hashed whole, an upload cut short leaves nothing behind, a recorder that falls behind loses bytes
of a call (said on its record), never the call, and a barrier comes back after everything before it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mitmproxy import http
from mitmproxy.test import tflow

from llmtap import handoff
from llmtap.capture import Capture, End, build
from llmtap.capture.recorder import Recorder
from llmtap.intercept.addon import AddonConfig, LlmTapAddon
from llmtap.intercept.attribution import Fingerprinter
from llmtap.intercept.calls import HANDOFF_BYTES
from llmtap.intercept.outbox import MAX_BUFFER, Outbox, _Protocol

MESSAGES = [
    handoff.RequestPart(1, [b"a" * 10, b"b"]),
    handoff.Request(
        1,
        1.5,
        2.5,
        "POST",
        "h",
        443,
        "/p",
        [("a", "b")],
        b"{}",
        2,
        "",
        False,
        "openai",
        "OpenAIChat",
        "",
        "",
        "c1",
        False,
        7,
    ),
    handoff.Response(1, 200, [("content-type", "text/event-stream")], 3.0),
    handoff.Body(1, [(3.1, b"data: x\n\n")]),
    handoff.End(1, "complete", 3.2, "", 5),
    handoff.Gap(2, True, 99),
    handoff.SocketOpen(3, [], 1.0),
    handoff.SocketMessage(3, True, 1.1, b"{}"),
    handoff.SocketClose(3, None, 1.2, "gone"),
    handoff.Barrier(4),
    handoff.WorkerState(0, True, False, 1, 0, 5, 2, {"cap": 1}, ""),
]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(MESSAGES), max_size=30), st.lists(st.integers(0, 5000), max_size=10))
def test_frames_decode_to_the_messages_whatever_the_split(batch: list[Any], cuts: list[int]) -> None:
    wire = handoff.encode(batch) + handoff.encode(batch[::-1])
    points = sorted({c % (len(wire) + 1) for c in cuts})
    dec = handoff.Decoder()
    got = [m for a, b in zip([0, *points], [*points, len(wire)], strict=True) for m in dec.feed(wire[a:b])]
    assert got == batch + batch[::-1]


class Pipe:
    def __init__(self, tmp_path: Path) -> None:
        self.got: list[tuple[Capture, End]] = []
        self.sent: list[handoff.Message] = []
        self.recorder = Recorder(lambda c, e: self.got.append((c, e)), Fingerprinter.from_data_dir(tmp_path))

    def put(self, msg: handoff.Message) -> None:
        self.sent.append(msg)
        self.recorder.handle(0, [msg])


def upload(a: LlmTapAddon, body: bytes, pieces: int) -> http.HTTPFlow:
    f = tflow.tflow()
    f.request.host, f.request.port, f.request.scheme = "api.openai.com", 443, "https"
    f.request.method, f.request.path = "POST", "/v1/chat/completions"
    f.request.content = b""
    f.response = None
    a.requestheaders(f)
    assert callable(f.request.stream)
    step = len(body) // pieces + 1
    for i in range(0, len(body), step):
        assert f.request.stream(body[i : i + step]) == body[i : i + step]
    return f


def test_a_large_request_body_goes_in_parts_and_is_hashed_whole(tmp_path: Path) -> None:
    pipe = Pipe(tmp_path)
    a = LlmTapAddon(AddonConfig(), pipe.put)
    messages = [{"role": "user", "content": "x" * 1000} for _ in range(2000)]
    body = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
    assert len(body) > 4 * HANDOFF_BYTES
    f = upload(a, body, 64)
    a.request(f)
    f.response = http.Response.make(200, b"", {"content-type": "application/json"})
    a.responseheaders(f)
    a.response(f)
    parts = [m for m in pipe.sent if isinstance(m, handoff.RequestPart)]
    assert len(parts) >= 4 and all(sum(map(len, p.chunks)) >= HANDOFF_BYTES for p in parts)
    ((cap, end),) = pipe.got
    rec = build(cap, end, None)[0]
    assert rec.request_hash == hashlib.sha256(body).hexdigest()[:32] and rec.request_bytes == len(body)
    assert rec.request_model == "gpt-4o" and not cap.parse_error  # parsed whole, from its parts


def test_an_upload_cut_before_its_end_leaves_nothing_in_the_recorder(tmp_path: Path) -> None:
    pipe = Pipe(tmp_path)
    a = LlmTapAddon(AddonConfig(), pipe.put)
    f = upload(a, b"x" * (3 * HANDOFF_BYTES), 3)
    assert pipe.recorder._bodies  # the parts are waiting for their request's end
    f.error = type("E", (), {"msg": "Client disconnected."})()  # type: ignore[assignment]
    a.error(f)
    assert not pipe.recorder._bodies and not pipe.got and a.inflight == 0


class Transport:
    def __init__(self, buffered: int) -> None:
        self.buffered, self.wrote = buffered, b""

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.wrote += data


def test_a_recorder_far_behind_gets_gaps_and_still_every_call(tmp_path: Path) -> None:
    out = Outbox()
    out._transport = Transport(MAX_BUFFER + 1)  # type: ignore[assignment]
    for m in MESSAGES[1:5]:  # one streamed call
        out.put(m)
    out.flush()
    sent = handoff.Decoder().feed(out._transport.wrote)  # type: ignore[union-attr]
    assert [type(m).__name__ for m in sent] == ["Request", "Response", "Gap", "End"]
    got: list[tuple[Capture, End]] = []
    Recorder(lambda c, e: got.append((c, e)), Fingerprinter.from_data_dir(tmp_path)).handle(0, sent)
    ((cap, end),) = got
    rec = build(cap, end, None)[0]
    assert rec.response_bytes == len(b"data: x\n\n") and "not handed off" in rec.parse_error


def test_a_barrier_comes_back_after_what_was_put_before_it() -> None:
    out = Outbox()
    out._transport = Transport(0)  # type: ignore[assignment]
    out.put(MESSAGES[4])
    _Protocol(out, lambda: None).data_received(handoff.encode([handoff.Barrier(9)]))
    assert handoff.Decoder().feed(out._transport.wrote) == [MESSAGES[4], handoff.Barrier(9)]  # type: ignore[union-attr]
