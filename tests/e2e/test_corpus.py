"""Recorded real provider responses (tests/corpus) through a real `llmtap run` over TLS.

The mock provider serves a recording byte for byte, paced frame by frame, with its recorded
status and headers (``x-mock-replay``); the official SDKs or a raw HTTPS client call through
the sidecar, and the stored ``llm_calls`` row is asserted against values read off the recording.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from helpers import Mock, Sidecar, session_id, start_sidecar, stop

from llmtap.testing.rawclient import request

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def recorded_request(name: str) -> tuple[str, str, dict[str, Any]]:
    meta = json.loads((CORPUS / name).with_suffix(".meta.json").read_text())
    return meta["host"], meta["path"], meta["request"]


def replay(sc: Sidecar, name: str, host: str | None = None, path: str | None = None) -> dict[str, Any]:
    rec_host, rec_path, body = recorded_request(name)
    sid = session_id()
    headers = {"x-llmtap-session": sid, "x-mock-replay": name, "x-mock-delay-ms": "2"}
    r = request(host or rec_host, 443, path or rec_path, body, headers, sc.bundle, proxy=("127.0.0.1", sc.listen))
    assert r.status < 600
    return sc.row(sid)


def test_xai_stream_with_the_openai_sdk(proxied: Sidecar) -> None:
    # xai/reasoning_outside_completion_stream.sse: five reasoning_content deltas, "Hello", usage
    # {prompt 12, completion 1, total 303, reasoning 290, cached 11}: 303 = 12 + 1 + 290.
    sid = session_id()
    client = openai.OpenAI(api_key="xai-test", base_url="https://api.x.ai/v1", max_retries=0)
    stream = client.chat.completions.create(
        model="grok-3-mini",
        messages=[{"role": "user", "content": "Say a single word."}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"x-llmtap-session": sid, "x-mock-replay": "xai/reasoning_outside_completion_stream.sse"},
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello"
    row = proxied.row(sid)
    assert (row["provider"], row["api"], row["stream"], row["outcome"]) == (
        "x_ai",
        "openai.chat_completions",
        True,
        "ok",
    )
    assert (row["input_tokens"], row["output_tokens"], row["reasoning_tokens"], row["cache_read_tokens"]) == (
        12,
        291,
        290,
        11,
    )
    assert row["content_events"] == 6 and row["ttft_ms"] is not None and row["usage_source"] == "provider"


def test_anthropic_thinking_stream_with_the_anthropic_sdk(proxied: Sidecar) -> None:
    # anthropic/thinking_stream.sse: 13 non-empty thinking deltas + 95 text deltas; usage
    # {input 43, output 282}; no thinking count.
    sid = session_id()
    client = anthropic.Anthropic(api_key="sk-ant-test", max_retries=0)
    with client.messages.stream(
        model="claude-sonnet-4-0",
        max_tokens=4096,
        messages=[{"role": "user", "content": "How do I cross the street?"}],
        extra_headers={"x-llmtap-session": sid, "x-mock-replay": "anthropic/thinking_stream.sse"},
    ) as s:
        final = s.get_final_message()
    assert final.usage.output_tokens == 282
    row = proxied.row(sid)
    assert (row["response_id"], row["finish_reason_raw"], row["service_tier"]) == (
        "msg_01ALwQ87pTS7hH1PjSdC9wJD",
        "end_turn",
        "standard",
    )
    assert (row["input_tokens"], row["output_tokens"], row["reasoning_tokens"], row["content_events"]) == (
        43,
        282,
        0,
        108,
    )


def test_recorded_streams_and_errors_raw(sidecar: Sidecar) -> None:
    # bedrock/converse_stream.bin: binary event-stream, 29 text deltas, usage {13, 82}, latencyMs 522
    row = replay(sidecar, "bedrock/converse_stream.bin")
    assert (row["provider"], row["api"], row["stream"], row["content_events"]) == (
        "aws.bedrock",
        "bedrock.converse",
        True,
        29,
    )
    assert (row["input_tokens"], row["output_tokens"], row["provider_processing_ms"]) == (13, 82, 522.0)
    # groq/tool_use_failed_stream.sse: the in-stream error says invalid_request_error / 400
    row = replay(sidecar, "groq/tool_use_failed_stream.sse")
    assert (row["outcome"], row["mid_stream_error"], row["error_type"], row["error_code"]) == (
        "error",
        True,
        "bad_request",
        "tool_use_failed",
    )
    # gemini/error_429_retry_info.json: RetryInfo retryDelay "34.4s"; answering a stream request
    row = replay(
        sidecar,
        "gemini/error_429_retry_info.json",
        path="/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
    )
    assert (row["status_code"], row["error_type"], row["retry_after_s"], row["stream"]) == (
        429,
        "rate_limited",
        34.4,
        True,
    )
    # bedrock/error_400_message.json: {"message": "..."} only
    row = replay(sidecar, "bedrock/error_400_message.json")
    assert (row["status_code"], row["error_message"]) == (400, "The provided model identifier is invalid.")


def test_provider_identity_and_price_on_intercepted_gateway_hosts(mock: Mock, tmp_path: Path) -> None:
    """An Azure deployment path behind an APIM gateway and a Vertex publisher path behind a proxy:
    the path names the provider, so the call is priced as that provider's."""
    gateways = ("apim.gateway.internal", "vertex.gateway.internal")
    args: list[str] = []
    for host in gateways:
        args += ["--intercept", f"{host}:443", "--connect-to", f"{host}:443:127.0.0.1:{mock.port}"]
    sc = start_sidecar(tmp_path / "data", mock, *args)
    try:
        # azure/chat_content_filter_results.json: deployment gpt-4o, usage {14, 9};
        # gpt-4o list price $2.50 / $10 per million tokens.
        row = replay(sc, "azure/chat_content_filter_results.json", host="apim.gateway.internal")
        assert (row["provider"], row["api"], row["request_model"], row["server_address"]) == (
            "azure.ai.openai",
            "openai.chat_completions",
            "gpt-4o",
            "apim.gateway.internal",
        )
        assert row["cost_usd"] == pytest.approx(14 * 2.5e-6 + 9 * 10e-6) and row["cost_source"] == "genai-prices"
        # vertex/flex_stream_thoughts.sse on a Vertex proxy: usage {5, 1 + 100 thoughts};
        # gemini-3-flash-preview list price $0.50 / $3 per million tokens.
        row = replay(sc, "vertex/flex_stream_thoughts.sse", host="vertex.gateway.internal")
        assert (row["provider"], row["request_model"], row["stream"], row["output_tokens"]) == (
            "gcp.vertex_ai",
            "gemini-3-flash-preview",
            True,
            101,
        )
        assert row["cost_usd"] == pytest.approx(5 * 0.5e-6 + 101 * 3e-6) and row["cost_source"] == "genai-prices"
    finally:
        stop(sc.proc)
