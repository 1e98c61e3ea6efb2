"""The mock's OpenAI streams against recorded OpenAI streams: what the real API puts on the wire, the mock does.

Expected shapes come from the recordings in ``tests/corpus/openai`` (their PROVENANCE rows), not from llmtap's
output: every Chat Completions chunk (the usage chunk too) and every Responses ``*.delta`` event carries
``obfuscation``, a random padding string; no other Responses event does; a request with
``stream_options.include_obfuscation: false`` gets none; OpenAI-compatible providers send none.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmtap.testing.mock.server import plan

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "openai"


def _events(data: bytes) -> list[dict[str, object]]:
    out = []
    for line in data.decode().splitlines():
        if line.startswith("data: {"):
            out.append(json.loads(line[6:]))
    return out


def _padded(events: list[dict[str, object]]) -> list[bool]:
    return [isinstance(e.get("obfuscation"), str) and 1 <= len(str(e["obfuscation"])) <= 16 for e in events]


def _mock(host: str, path: str, body: dict[str, object]) -> list[dict[str, object]]:
    events = _events(b"".join(plan(path, {"host": host}, {"stream": True, **body}).chunks))
    assert len(events) > 3, (host, path)  # a stream, not an error reply
    return events


def test_recorded_openai_streams_pad_every_chat_chunk_and_every_responses_delta() -> None:
    """The recordings the mock is held to (a test of the premise)."""
    chat = _events((CORPUS / "chat_stream_usage.sse").read_bytes())
    assert all(_padded(chat)) and chat[-1].get("usage")
    resp = _events((CORPUS / "responses_stream_text.sse").read_bytes())
    assert all(p == str(e["type"]).endswith(".delta") for e, p in zip(resp, _padded(resp), strict=True))


@pytest.mark.parametrize("usage", [True, False])
def test_the_mock_pads_every_openai_chat_chunk(usage: bool) -> None:
    body = {"model": "gpt-4o-mini", "stream_options": {"include_usage": usage}}
    events = _mock("api.openai.com", "/v1/chat/completions", body)
    assert len(events) > 3 and all(_padded(events))
    assert bool(events[-1].get("usage")) is usage


def test_the_mock_pads_only_the_responses_deltas() -> None:
    events = _mock("api.openai.com", "/v1/responses", {"model": "gpt-4.1", "input": "hi"})
    deltas = [str(e["type"]).endswith(".delta") for e in events]
    assert any(deltas) and _padded(events) == deltas


def test_include_obfuscation_false_and_compatible_providers_get_no_padding() -> None:
    off = {"model": "gpt-4o-mini", "stream_options": {"include_obfuscation": False}}
    assert not any(_padded(_mock("api.openai.com", "/v1/chat/completions", off)))
    assert not any(_padded(_mock("api.groq.com", "/openai/v1/chat/completions", {"model": "llama-3.1-8b-instant"})))
    azure = "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
    assert not any(_padded(_mock("myres.openai.azure.com", azure, {"model": "gpt-4o"})))


def test_two_replies_to_one_request_are_byte_identical() -> None:
    body = {"model": "gpt-4o-mini", "stream": True}
    one, two = (b"".join(plan("/v1/chat/completions", {"host": "api.openai.com"}, body).chunks) for _ in range(2))
    assert one == two and b'"obfuscation"' in one
