"""Text-only chat chunks, Messages deltas and Responses deltas read from their bytes (``adapters/deltas.py``)
observe exactly what a full parse of every event observes: on every recorded stream of those APIs, and on
generated streams with any text (quotes, escapes, control characters, any script), any padding, any
sequence numbers, and events that change what the template assumed."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus import names, recording
from llmtap.adapters import AnthropicMessages, OpenAIChat, OpenAIResponses
from llmtap.adapters.base import Observation
from llmtap.adapters.deltas import DeltaTemplate
from llmtap.decode import SSEDecoder


class ParseEveryChunk(OpenAIChat):
    learns_deltas = False


class Counting(OpenAIChat):
    def __init__(self) -> None:
        super().__init__()
        self.parsed = 0

    def parse(self, data: str) -> Any:  # type: ignore[override]
        self.parsed += 1
        return super().parse(data)


def observe(adapter: Any, body: bytes) -> dict[str, Any]:
    dec = SSEDecoder()
    for i, ev in enumerate([*dec.feed(body), *dec.flush()]):
        adapter.on_event(ev, float(i))
    return snapshot(adapter.obs)


def snapshot(obs: Observation) -> dict[str, Any]:
    out = {f.name: getattr(obs, f.name) for f in dataclasses.fields(obs) if f.name != "clock"}
    c = obs.clock
    out["clock"] = (c.first, c.last, c.count, list(c.gaps), c.gap_max)
    return out


CHAT_STREAMS = [
    n for n in names() if n.endswith(".sse") and recording(n).path.rstrip("/").endswith("/chat/completions")
]


@pytest.mark.parametrize("name", CHAT_STREAMS)
def test_every_recorded_chat_stream_is_observed_the_same(name: str) -> None:
    body = recording(name).body
    assert observe(OpenAIChat(), body) == observe(ParseEveryChunk(), body)


def test_the_padded_text_chunks_of_a_real_stream_are_read_from_their_bytes() -> None:
    a = Counting()
    observe(a, recording("openai/chat_stream_obfuscation.sse").body)
    assert a.obs.clock.count == 300 and a.parsed <= 4  # role, one text chunk, finish, usage ([DONE] is not parsed)


TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(['"', "\\", "\n", "\x00", "\x1f", "é", "\u2028"]))


def chunk(delta: dict[str, Any], pad: str | None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": extra.pop("model", "gpt-4o"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": extra.pop("finish_reason", None)}],
        **extra,
    }
    if pad is not None:
        out["obfuscation"] = pad
    return out


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    ascii_only = draw(st.booleans())
    pad = draw(st.booleans())
    events: list[str] = [json.dumps(chunk({"role": "assistant", "content": ""}, "x" if pad else None))]
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["text", "text", "text", "model", "finish", "tool", "raw", "usage", "error"]))
        p = draw(TEXT) if pad else None
        if kind == "text":
            e = chunk({"content": draw(TEXT)}, p)
        elif kind == "model":
            e = chunk({"content": draw(TEXT)}, p, model=draw(st.sampled_from(["gpt-4o", "other"])))
        elif kind == "finish":
            e = chunk({"content": draw(TEXT)}, p, finish_reason="stop")
        elif kind == "tool":
            e = chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": draw(TEXT)}}]}, p)
        elif kind == "usage":
            e = chunk({}, p, usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
        elif kind == "error":
            e = {"error": {"message": draw(TEXT), "type": "server_error"}}
        else:  # bytes that look like a text chunk around a raw control character or quote: not JSON
            t = json.dumps(chunk({"content": "@"}, p), ensure_ascii=ascii_only)
            events.append(t.replace("@", draw(st.sampled_from(['"', "\x01", "\\x", "a\\"]))))
            continue
        events.append(json.dumps(e, ensure_ascii=ascii_only, separators=(",", ":")))
    return b"".join(b"data: " + e.encode("utf-8", "surrogatepass") + b"\n\n" for e in [*events, "[DONE]"])


@settings(max_examples=400, deadline=None)
@given(streams())
def test_generated_streams_are_observed_the_same(body: bytes) -> None:
    assert observe(OpenAIChat(), body) == observe(ParseEveryChunk(), body)


@settings(max_examples=300, deadline=None)
@given(TEXT, TEXT, TEXT, st.booleans())
def test_a_template_reads_the_text_json_would(first: str, text: str, pad: str, padded: bool) -> None:
    compact = {"ensure_ascii": False, "separators": (",", ":")}  # as OpenAI sends chunks
    learned = json.dumps(chunk({"content": first}, pad if padded else None), **compact)  # type: ignore[arg-type]
    tpl = DeltaTemplate.learn(learned)
    assert tpl is not None
    data = json.dumps(chunk({"content": text}, (pad + "!") if padded else None), **compact)  # type: ignore[arg-type]
    got = tpl.match(data)
    assert got == json.loads(data)["choices"][0]["delta"]["content"]
    assert tpl.match(data.replace('"created":1', '"created":2')) is None  # anything else that changed: no match


class AnthropicParseEvery(AnthropicMessages):
    def on_event(self, ev: Any, t: float) -> None:
        self._deltas.clear()  # nothing learned: every event parsed
        super().on_event(ev, t)
        self._deltas.clear()


ANTHROPIC_STREAMS = [n for n in names() if n.endswith(".sse") and recording(n).path.rstrip("/").endswith("/messages")]


@pytest.mark.parametrize("name", ANTHROPIC_STREAMS)
def test_every_recorded_messages_stream_is_observed_the_same(name: str) -> None:
    body = recording(name).body
    assert observe(AnthropicMessages(), body) == observe(AnthropicParseEvery(), body)


@st.composite
def anthropic_streams(draw: st.DrawFn) -> bytes:
    def ev(name: str, obj: dict[str, Any]) -> bytes:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=draw(st.booleans()))
        return f"event: {name}\ndata: {text}\n\n".encode("utf-8", "surrogatepass")

    out = [ev("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {}}})]
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["text_delta", "thinking_delta", "input_json_delta", "other", "start"]))
        index = draw(st.integers(0, 2))
        if kind == "start":
            block = {"type": draw(st.sampled_from(["text", "tool_use"])), "id": "t", "name": "f", "text": draw(TEXT)}
            start = {"type": "content_block_start", "index": index, "content_block": block}
            out.append(ev("content_block_start", start))
            continue
        key = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}.get(kind, "text")
        delta = {"type": kind, key: draw(TEXT)}
        name = draw(st.sampled_from(["content_block_delta", "content_block_delta", "message"]))
        out.append(ev(name, {"type": "content_block_delta", "index": index, "delta": delta}))
    out.append(ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}))
    out.append(ev("message_stop", {"type": "message_stop"}))
    return b"".join(out)


@settings(max_examples=400, deadline=None)
@given(anthropic_streams())
def test_generated_messages_streams_are_observed_the_same(body: bytes) -> None:
    assert observe(AnthropicMessages(), body) == observe(AnthropicParseEvery(), body)


class ResponsesParseEvery(OpenAIResponses):
    def on_event(self, ev: Any, t: float) -> None:
        self._deltas.clear()
        super().on_event(ev, t)
        self._deltas.clear()


class ResponsesCounting(OpenAIResponses):
    def __init__(self) -> None:
        super().__init__()
        self.parsed = 0

    def parse(self, data: str) -> Any:  # type: ignore[override]
        self.parsed += 1
        return super().parse(data)


RESPONSES_STREAMS = [n for n in names() if n.endswith(".sse") and recording(n).path.rstrip("/").endswith("/responses")]


@pytest.mark.parametrize("name", RESPONSES_STREAMS)
def test_every_recorded_responses_stream_is_observed_the_same(name: str) -> None:
    body = recording(name).body
    assert observe(OpenAIResponses(), body) == observe(ResponsesParseEvery(), body)


def test_the_numbered_padded_deltas_of_a_real_responses_stream_are_read_from_their_bytes() -> None:
    a = ResponsesCounting()
    observe(a, recording("openai/responses_stream_text.sse").body)
    # 8 other events are parsed, and the first of the 79 text deltas
    assert a.obs.clock.count == 79 and a.parsed == 9


@st.composite
def responses_streams(draw: st.DrawFn) -> bytes:
    seq_first = draw(st.booleans())  # Azure sends sequence_number first, OpenAI last

    def ev(name: str, obj: dict[str, Any]) -> bytes:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=draw(st.booleans()))
        return f"event: {name}\ndata: {text}\n\n".encode("utf-8", "surrogatepass")

    created = {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5", "status": "in_progress"}}
    out, seq = [ev("response.created", created)], 1
    for _ in range(draw(st.integers(0, 12))):
        name = draw(st.sampled_from(["response.output_text.delta", "response.refusal.delta", "response.x.delta"]))
        kind = draw(st.sampled_from(["text", "text", "text", "item", "logprobs", "number", "raw"]))
        body: dict[str, Any] = {"type": name}
        if seq_first:
            body["sequence_number"] = seq
        body |= {"item_id": "msg_2" if kind == "item" else "msg_1", "output_index": 0, "content_index": 0}
        body["delta"] = draw(TEXT) if kind != "number" else draw(st.integers(0, 3))
        body["logprobs"] = [{"token": "a"}] if kind == "logprobs" else []
        if draw(st.booleans()):
            body["obfuscation"] = draw(TEXT)
        if not seq_first:
            body["sequence_number"] = seq
        seq += 1
        if kind == "raw":  # a raw quote or control character where the text is: not JSON
            body["delta"] = "@"
            raw = draw(st.sampled_from(['"', "\x01", "\\x"]))
            text = json.dumps(body, separators=(",", ":")).replace('"@"', '"' + raw + '"')
            out.append(f"event: {name}\ndata: {text}\n\n".encode())
            continue
        out.append(ev(name, body))
    usage = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
    done = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "usage": usage}}
    out.append(ev("response.completed", done))
    return b"".join(out)


@settings(max_examples=400, deadline=None)
@given(responses_streams())
def test_generated_responses_streams_are_observed_the_same(body: bytes) -> None:
    assert observe(OpenAIResponses(), body) == observe(ResponsesParseEvery(), body)
