"""Audio tokens, server-side tools and cold starts priced through a real ``llmtap run`` with the official SDKs
(issue #27): a Realtime voice turn, an audio chat completion, a Gemini call with audio input, an Anthropic
call with web searches, a Responses call with a hosted web search, a session's first call.

Recorded real responses are served by the mock where public recordings exist (``x-mock-replay``, provenance in
tests/corpus/PROVENANCE.md); the Realtime turn and the Gemini audio call are the mock's documented shapes. Every
expected number is read from what the SDK received and priced here with genai-prices — never read back from
llmtap.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from genai_prices import Usage, calc_price
from google import genai
from helpers import Sidecar, session_id

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
CORPUS = Path(__file__).resolve().parents[1] / "corpus"
REL = 1e-6


def genai_price(usage: Usage, model: str, provider: str, when: float) -> tuple[float, float]:
    """``(total, tool fees)``: genai-prices' price of ``usage`` at the call's time."""
    calc = calc_price(usage, model, provider_id=provider, genai_request_timestamp=datetime.fromtimestamp(when, UTC))
    return float(calc.total_price), float(calc.total_price - calc.input_price - calc.output_price)


def when(row: dict[str, Any]) -> float:
    ts = row["timestamp"]
    return ts.timestamp() if isinstance(ts, datetime) else datetime.fromisoformat(str(ts)).timestamp()


def recorded_request(name: str) -> dict[str, Any]:
    return dict(json.loads((CORPUS / name).with_suffix(".meta.json").read_text())["request"])


def assert_priced(row: dict[str, Any], usage: Usage, model: str, provider: str) -> None:
    total, tools = genai_price(usage, model, provider, when(row))
    assert row["cost_usd"] == pytest.approx(total, rel=REL)
    assert row["tool_cost_usd"] == pytest.approx(tools, rel=REL, abs=1e-12)
    parts = row["input_cost_usd"] + row["output_cost_usd"] + row["tool_cost_usd"]
    assert row["cost_usd"] == pytest.approx(parts, rel=1e-9)  # tool fees are part of cost_usd


def test_realtime_voice_turn(proxied: Sidecar) -> None:
    sid = session_id()
    client = openai.OpenAI(api_key="sk-test-rt-modal-0123", max_retries=0)
    with client.realtime.connect(model="gpt-realtime", extra_headers={"x-llmtap-session": sid}) as conn:
        conn.send({"type": "response.create", "response": {"output_modalities": ["audio"]}})
        done: dict[str, Any] = {}
        while not done:
            ev = json.loads(conn.recv_bytes())
            if ev["type"] == "response.done":
                done = ev["response"]["usage"]
    itd, otd = done["input_token_details"], done["output_token_details"]
    row = proxied.row(sid)
    assert (row["api"], row["transport"]) == ("openai.realtime", "websocket")
    assert (row["input_tokens"], row["input_audio_tokens"], row["input_image_tokens"]) == (
        done["input_tokens"],
        itd["audio_tokens"],
        itd["image_tokens"],
    )
    assert (row["cache_read_tokens"], row["cache_read_audio_tokens"]) == (
        itd["cached_tokens"],
        itd["cached_tokens_details"]["audio_tokens"],
    )
    assert (row["output_tokens"], row["output_audio_tokens"]) == (done["output_tokens"], otd["audio_tokens"])
    assert row["input_audio_tokens"] > 0 and row["output_audio_tokens"] > 0
    usage = Usage(
        input_tokens=done["input_tokens"],
        cache_read_tokens=itd["cached_tokens"],
        input_audio_tokens=itd["audio_tokens"],
        cache_audio_read_tokens=itd["cached_tokens_details"]["audio_tokens"],
        output_tokens=done["output_tokens"],
        output_audio_tokens=otd["audio_tokens"],
    )
    assert_priced(row, usage, "gpt-realtime", "openai")
    # audio at its own rate: gpt-realtime's audio output costs 4x its text output ($64 vs $16 per Mtok)
    assert row["output_cost_usd"] > 2 * row["text_rate_output_cost_usd"]


def test_audio_chat_completion_recorded(proxied: Sidecar) -> None:
    sid = session_id()
    name = "openai/chat_audio_input.json"
    client = openai.OpenAI(api_key="sk-test-audio", max_retries=0)
    resp = client.chat.completions.create(
        **recorded_request(name), extra_headers={"x-llmtap-session": sid, "x-mock-replay": name}
    )
    u = resp.usage
    assert u is not None and u.prompt_tokens_details is not None and u.completion_tokens_details is not None
    row = proxied.row(sid)
    assert (row["input_tokens"], row["input_audio_tokens"]) == (u.prompt_tokens, u.prompt_tokens_details.audio_tokens)
    assert (row["output_tokens"], row["output_audio_tokens"]) == (
        u.completion_tokens,
        u.completion_tokens_details.audio_tokens,
    )
    assert row["input_audio_tokens"] == 2 and row["server_tool_calls"] == {}
    usage = Usage(
        input_tokens=u.prompt_tokens,
        input_audio_tokens=u.prompt_tokens_details.audio_tokens,
        output_tokens=u.completion_tokens,
    )
    assert_priced(row, usage, resp.model, "openai")


def test_gemini_audio_input(proxied: Sidecar) -> None:
    sid = session_id()
    client = genai.Client(
        api_key="AIza-test-audio", http_options=genai.types.HttpOptions(headers={"x-llmtap-session": sid})
    )
    audio = genai.types.Part.from_bytes(data=b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(64), mime_type="audio/wav")
    resp = client.models.generate_content(model="gemini-2.5-flash", contents=[audio, "What is said?"])
    m = resp.usage_metadata
    assert m is not None

    def modality(details: Any, name: str) -> int:
        return sum(d.token_count or 0 for d in details or [] if d.modality and d.modality.name == name)

    audio_in, audio_cached = modality(m.prompt_tokens_details, "AUDIO"), modality(m.cache_tokens_details, "AUDIO")
    output = (m.candidates_token_count or 0) + (m.thoughts_token_count or 0)
    row = proxied.row(sid)
    assert audio_in > 0 and audio_cached > 0
    assert (
        row["input_tokens"],
        row["input_audio_tokens"],
        row["cache_read_tokens"],
        row["cache_read_audio_tokens"],
    ) == (
        m.prompt_token_count,
        audio_in,
        m.cached_content_token_count,
        audio_cached,
    )
    assert row["output_tokens"] == output
    usage = Usage(
        input_tokens=m.prompt_token_count,
        cache_read_tokens=m.cached_content_token_count,
        input_audio_tokens=audio_in,
        cache_audio_read_tokens=audio_cached,
        output_tokens=output,
    )
    assert_priced(row, usage, "gemini-2.5-flash", "google")


def test_anthropic_web_searches_recorded(proxied: Sidecar) -> None:
    sid = session_id()
    name = "anthropic/web_search_stream.sse"
    body = recorded_request(name)
    body.pop("stream", None)
    client = anthropic.Anthropic(api_key="sk-ant-test-web", max_retries=0)
    with client.messages.stream(**body, extra_headers={"x-llmtap-session": sid, "x-mock-replay": name}) as s:
        final = s.get_final_message()
    u = final.usage
    assert u.server_tool_use is not None
    row = proxied.row(sid)
    assert row["server_tool_calls"] == {"web_search": u.server_tool_use.web_search_requests} == {"web_search": 2}
    assert row["tool_calls"] == 0  # the searches ran on Anthropic's side: nothing for the client to run
    usage = Usage(
        input_tokens=u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0),
        cache_read_tokens=u.cache_read_input_tokens or None,
        cache_write_tokens=u.cache_creation_input_tokens or None,
        output_tokens=u.output_tokens,
        web_searches=u.server_tool_use.web_search_requests,
    )
    assert_priced(row, usage, final.model, "anthropic")
    assert row["tool_cost_usd"] == pytest.approx(2 * 10 / 1000, rel=REL)  # $10 per 1,000 searches


def test_responses_hosted_web_search_recorded(proxied: Sidecar) -> None:
    sid = session_id()
    name = "openai/responses_web_search.json"
    client = openai.OpenAI(api_key="sk-test-hosted", max_retries=0)
    resp = client.responses.create(
        **recorded_request(name), extra_headers={"x-llmtap-session": sid, "x-mock-replay": name}
    )
    searches = sum(1 for item in resp.output if item.type == "web_search_call")
    u = resp.usage
    assert u is not None and searches == 1
    row = proxied.row(sid)
    assert (row["finish_reason"], row["tool_calls"], row["server_tool_calls"]) == ("stop", 0, {"web_search": searches})
    usage = Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens, web_searches=searches)
    assert_priced(row, usage, resp.model, "openai")
    assert row["tool_cost_usd"] > 0


def test_first_call_of_a_session_is_a_free_cold_start(proxied: Sidecar) -> None:
    sid = session_id()
    client = anthropic.Anthropic(
        api_key="sk-ant-test-cold-" + sid[:8], max_retries=0, default_headers={"x-mock-scenario": "prompt_cache"}
    )
    system = [{"type": "text", "text": "You are terse. " * 300 + sid, "cache_control": {"type": "ephemeral"}}]
    msg = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=20,
        system=system,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-llmtap-session": sid},
    )
    assert (msg.usage.cache_creation_input_tokens or 0) > 0 and not msg.usage.cache_read_input_tokens
    row = proxied.row(sid)
    assert (row["cache_miss_reason"], row["cache_miss_cost_usd"]) == ("first_call", 0.0)
