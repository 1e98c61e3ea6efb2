"""Each modality at its own rate and server tool uses at their unit price (issue #27): rows from recorded real
responses priced as genai-prices prices the same usage, the price file's modality and tool prices, and tool
kinds no price covers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from corpus import CORPUS, replay_row
from llmtap.record import CallRecord
from llmtap.telemetry.pricing import PriceFileError, Pricer, load_price_file


def genai_total(usage: Usage, model: str, provider: str) -> tuple[float, float]:
    c = calc_price(usage, model, provider_id=provider)
    return float(c.total_price), float(c.total_price - c.input_price - c.output_price)


def test_recorded_audio_chat_priced_like_genai_prices() -> None:
    r = replay_row("openai/chat_audio_input.json")
    Pricer().apply(r)
    u = json.loads((CORPUS / "openai/chat_audio_input.json").read_text())["usage"]
    usage = Usage(
        input_tokens=u["prompt_tokens"],
        input_audio_tokens=u["prompt_tokens_details"]["audio_tokens"],
        output_tokens=u["completion_tokens"],
    )
    total, _ = genai_total(usage, "gpt-4o-audio-preview-2025-06-03", "openai")
    assert r.cost_usd == pytest.approx(total, rel=1e-9) and r.tool_cost_usd == 0.0


def test_recorded_hosted_web_search_fee_is_part_of_the_cost() -> None:
    r = replay_row("openai/responses_web_search.json")
    Pricer().apply(r)
    body = json.loads((CORPUS / "openai/responses_web_search.json").read_text())
    usage = Usage(
        input_tokens=body["usage"]["input_tokens"], output_tokens=body["usage"]["output_tokens"], web_searches=1
    )
    total, fees = genai_total(usage, body["model"], "openai")
    assert fees > 0 and r.tool_cost_usd == pytest.approx(fees, rel=1e-9)
    assert r.cost_usd == pytest.approx(total, rel=1e-9)
    assert r.cost_usd == pytest.approx(r.input_cost_usd + r.output_cost_usd + r.tool_cost_usd)  # type: ignore[operator]


def test_recorded_anthropic_web_searches() -> None:
    r = replay_row("anthropic/web_search_stream.sse")
    Pricer().apply(r)
    usage = Usage(input_tokens=31772, output_tokens=644, web_searches=2)  # message_delta usage, read off the bytes
    total, fees = genai_total(usage, r.response_model or r.request_model, "anthropic")
    assert (r.tool_cost_usd, r.cost_usd) == (pytest.approx(fees, rel=1e-9), pytest.approx(total, rel=1e-9))


def realtime(**kw: object) -> CallRecord:
    base: dict[str, object] = {
        "provider": "openai",
        "request_model": "gpt-realtime",
        "input_tokens": 1000,
        "input_audio_tokens": 800,
        "cache_read_tokens": 300,
        "cache_read_audio_tokens": 200,
        "output_tokens": 500,
        "output_audio_tokens": 450,
        "usage_source": "provider",
    }
    base.update(kw)
    return CallRecord(**base)  # type: ignore[arg-type]


def test_audio_at_its_own_rate_and_the_text_rate_beside_it() -> None:
    r = realtime()
    Pricer().apply(r)
    usage = Usage(
        input_tokens=1000,
        input_audio_tokens=800,
        cache_read_tokens=300,
        cache_audio_read_tokens=200,
        output_tokens=500,
        output_audio_tokens=450,
    )
    assert r.cost_usd == pytest.approx(genai_total(usage, "gpt-realtime", "openai")[0], rel=1e-9)
    text_in = calc_price(Usage(input_tokens=1000), "gpt-realtime", provider_id="openai").input_price
    text_out = calc_price(Usage(output_tokens=500), "gpt-realtime", provider_id="openai").output_price
    assert (r.text_rate_input_cost_usd, r.text_rate_output_cost_usd) == (float(text_in), float(text_out))
    assert r.output_cost_usd is not None and r.output_cost_usd > 3 * r.text_rate_output_cost_usd  # $64 vs $16


def test_price_file_modalities_and_tools(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text(
        """
[[price]]
model = "voice-*"
input_mtok = 1
output_mtok = 2
input_audio_mtok = 10
cache_read_audio_mtok = 5
output_audio_mtok = 20
tools = { web_search = 0.02 }

[[price]]
provider = "anthropic"
model = "claude-*"
tools = { web_fetch = 0.001, web_search = 0.005 }
"""
    )
    pricer = Pricer(load_price_file(f))
    r = realtime(request_model="voice-1", server_tool_calls={"web_search": 3})
    pricer.apply(r)
    # input 1000 = text uncached 100 + text read from the cache 100 (no cache price: the input's) + audio
    # uncached 600 + audio read from the cache 200; output 500 = text 50 + audio 450
    inp = (100 * 1 + 100 * 1 + 600 * 10 + 200 * 5) / 1e6
    out = (50 * 2 + 450 * 20) / 1e6
    assert (r.input_cost_usd, r.output_cost_usd, r.tool_cost_usd) == (
        pytest.approx(inp),
        pytest.approx(out),
        pytest.approx(0.06),
    )
    assert r.cost_source == "price_file" and r.cost_usd == pytest.approx(inp + out + 0.06)
    # a tools-only rule: the tokens keep genai-prices' price, the rule's tools win over genai-prices' unit
    a = CallRecord(
        provider="anthropic", request_model="claude-sonnet-4-5", input_tokens=1000, output_tokens=100,
        usage_source="provider", server_tool_calls={"web_search": 2, "web_fetch": 4, "code_execution": 1},
    )  # fmt: skip
    pricer.apply(a)
    tokens = calc_price(Usage(input_tokens=1000, output_tokens=100), "claude-sonnet-4-5", provider_id="anthropic")
    assert a.cost_source == "genai-prices"
    assert a.tool_cost_usd == pytest.approx(2 * 0.005 + 4 * 0.001)
    assert a.cost_usd == pytest.approx(float(tokens.total_price) + a.tool_cost_usd)
    assert a.unpriced_tools == "code_execution"  # genai-prices has no Anthropic code-execution unit, nor the file


def test_tools_no_price_covers_keep_the_token_cost() -> None:
    r = CallRecord(
        provider="anthropic", request_model="claude-sonnet-4-5", input_tokens=1000, output_tokens=100,
        usage_source="provider", server_tool_calls={"web_fetch": 2},
    )  # fmt: skip
    Pricer().apply(r)
    tokens = calc_price(Usage(input_tokens=1000, output_tokens=100), "claude-sonnet-4-5", provider_id="anthropic")
    assert r.cost_usd == pytest.approx(float(tokens.total_price)) and r.cost_source == "genai-prices"
    assert (r.tool_cost_usd, r.unpriced_tools) == (None, "web_fetch")


def test_price_file_unknown_tool_kind_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text('{"price": [{"model": "m", "tools": {"teleport": 1.0}}]}')
    with pytest.raises(PriceFileError, match=r"price #1 is invalid.*teleport") as e:
        load_price_file(f)
    assert "\n" not in str(e.value)
