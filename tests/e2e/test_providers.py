"""Every provider API through a real `llmtap run` over TLS: Gemini (google-genai SDK), Vertex, Azure, Bedrock
(binary event-stream), OpenRouter, Groq, DeepSeek-style usage, Ollama NDJSON, and base-URL mode with the SDKs."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from helpers import Mock, Sidecar, session_id, start_sidecar, stop

from llmtap.testing.rawclient import request

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def via(sc: Sidecar, host: str, path: str, body: dict[str, Any], scenario: str = "", **hdrs: str) -> dict[str, Any]:
    sid = session_id()
    headers = {"x-llmtap-session": sid, **hdrs}
    if scenario:
        headers["x-mock-scenario"] = scenario
    r = request(host, 443, path, body, headers, sc.bundle, proxy=("127.0.0.1", sc.listen))
    assert r.status < 600
    return sc.row(sid)


def test_gemini_sdk_stream(proxied: Sidecar) -> None:
    from google import genai

    sid = session_id()
    client = genai.Client(
        api_key="AIza-test-key-0123456789", http_options=genai.types.HttpOptions(headers={"x-llmtap-session": sid})
    )
    text = "".join(
        c.text or "" for c in client.models.generate_content_stream(model="gemini-2.0-flash", contents="Say hi")
    )
    assert text.startswith("The quick")
    row = proxied.row(sid)
    assert (row["provider"], row["api"], row["operation"]) == (
        "gcp.gemini",
        "gemini.generate_content",
        "generate_content",
    )
    assert (row["request_model"], row["response_model"], row["response_id"]) == (
        "gemini-2.0-flash",
        "gemini-2.0-flash",
        "gemini-resp-1",
    )
    assert row["stream"] is True and row["content_events"] == 6 and row["ttft_ms"] is not None
    assert (row["input_tokens"], row["cache_read_tokens"], row["output_tokens"], row["reasoning_tokens"]) == (
        120,
        100,
        36,
        30,
    )
    assert (row["finish_reason"], row["finish_reason_raw"], row["outcome"]) == ("stop", "STOP", "ok")
    assert row["usage_source"] == "provider" and row["api_key_id"]


def test_gemini_sdk_non_stream(proxied: Sidecar) -> None:
    from google import genai

    sid = session_id()
    client = genai.Client(api_key="AIza-test", http_options=genai.types.HttpOptions(headers={"x-llmtap-session": sid}))
    assert client.models.generate_content(model="gemini-2.5-pro", contents="hi").text.startswith("The quick")
    row = proxied.row(sid)
    assert row["stream"] is False and row["request_model"] == "gemini-2.5-pro" and row["output_tokens"] == 36


@pytest.mark.parametrize("alt_sse", [True, False], ids=["sse", "json-array"])
def test_gemini_wire_stream(sidecar: Sidecar, alt_sse: bool) -> None:
    path = "/v1beta/models/gemini-2.0-flash:streamGenerateContent" + ("?alt=sse" if alt_sse else "")
    row = via(sidecar, "generativelanguage.googleapis.com", path, {"contents": []}, **{"x-goog-api-key": "k"})
    assert row["content_events"] == 6 and row["output_tokens"] == 36 and row["outcome"] == "ok"


def test_gemini_mid_stream_error_and_quotas(sidecar: Sidecar) -> None:
    g = "generativelanguage.googleapis.com"
    row = via(sidecar, g, "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", {}, "mid_stream_error")
    assert (row["outcome"], row["error_type"], row["mid_stream_error"], row["error_code"]) == (
        "error",
        "server_error",
        True,
        "500",
    )
    row = via(sidecar, g, "/v1beta/models/gemini-2.0-flash:generateContent", {}, "quota_per_minute")
    assert (row["status_code"], row["error_type"], row["error_code"]) == (429, "rate_limited", "429")
    row = via(sidecar, g, "/v1beta/models/gemini-2.0-flash:generateContent", {}, "quota_per_day")
    assert (row["status_code"], row["error_type"]) == (429, "quota_exhausted")


def test_vertex_host(sidecar: Sidecar) -> None:
    row = via(
        sidecar,
        "us-central1-aiplatform.googleapis.com",
        "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
        {"contents": []},
    )
    assert (row["provider"], row["request_model"], row["output_tokens"]) == ("gcp.vertex_ai", "gemini-2.0-flash", 36)


def test_azure_deployment(sidecar: Sidecar) -> None:
    row = via(
        sidecar,
        "myres.openai.azure.com",
        "/openai/deployments/prod-gpt4o/chat/completions?api-version=2024-10-21",
        {"stream": True, "stream_options": {"include_usage": True}, "messages": []},
        **{"api-key": "azkey"},
    )
    assert (row["provider"], row["api"], row["request_model"]) == (
        "azure.ai.openai",
        "openai.chat_completions",
        "prod-gpt4o",
    )
    assert row["input_tokens"] == 31 and row["outcome"] == "ok" and row["api_key_id"]


def test_bedrock_converse_stream_event_stream(sidecar: Sidecar) -> None:
    b = "bedrock-runtime.us-east-1.amazonaws.com"
    row = via(
        sidecar,
        b,
        "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream",
        {"messages": [], "inferenceConfig": {"maxTokens": 256}},
        authorization="AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20261129/us-east-1/bedrock/aws4_request, "
        "SignedHeaders=host, Signature=abc",
    )
    assert (row["provider"], row["api"]) == ("aws.bedrock", "bedrock.converse")
    assert row["request_model"] == "anthropic.claude-3-5-sonnet-20240620-v1:0"
    assert (row["input_tokens"], row["cache_read_tokens"], row["output_tokens"]) == (35, 10, 5)
    assert (row["finish_reason"], row["finish_reason_raw"], row["content_events"]) == ("stop", "end_turn", 5)
    assert row["provider_processing_ms"] == 812 and row["request_id"] == "req-bedrock-1"
    assert row["max_output_tokens"] == 256 and row["api_key_id"]


def test_bedrock_exception_frame_mid_stream(sidecar: Sidecar) -> None:
    row = via(
        sidecar, "bedrock-runtime.us-east-1.amazonaws.com", "/model/m/converse-stream", {}, "throttled_mid_stream"
    )
    assert (row["outcome"], row["error_type"], row["mid_stream_error"], row["error_code"]) == (
        "error",
        "rate_limited",
        True,
        "throttlingException",
    )


def test_bedrock_invoke_stream_with_claude_chunks(sidecar: Sidecar) -> None:
    row = via(
        sidecar,
        "bedrock-runtime.us-east-1.amazonaws.com",
        "/model/anthropic.claude-3-5-sonnet/invoke-with-response-stream",
        {"max_tokens": 64, "messages": []},
    )
    assert row["api"] == "bedrock.invoke" and row["provider"] == "aws.bedrock"
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_tokens"]) == (4628, 7, 3400)
    assert row["content_events"] == 7 and row["finish_reason"] == "stop"


def test_bedrock_converse_non_stream_and_throttling(sidecar: Sidecar) -> None:
    row = via(sidecar, "bedrock-runtime.us-east-1.amazonaws.com", "/model/amazon.nova-pro-v1:0/converse", {})
    assert (row["stream"], row["input_tokens"], row["output_tokens"], row["provider_processing_ms"]) == (
        False,
        25,
        5,
        640,
    )
    row = via(
        sidecar, "bedrock-runtime.us-east-1.amazonaws.com", "/model/amazon.nova-pro-v1:0/converse", {}, "throttled"
    )
    assert (row["status_code"], row["error_type"], row["error_code"]) == (429, "rate_limited", "ThrottlingException")


def test_openrouter_cost_comments_and_in_band_error(sidecar: Sidecar) -> None:
    row = via(
        sidecar,
        "openrouter.ai",
        "/api/v1/chat/completions",
        {"model": "openai/gpt-4o", "stream": True, "messages": []},
        "openrouter",
    )
    assert row["provider"] == "openrouter" and row["cost_usd"] == pytest.approx(0.00042)  # provider's own cost wins
    assert row["content_events"] == 8 and row["outcome"] == "ok"
    row = via(
        sidecar, "openrouter.ai", "/api/v1/chat/completions", {"stream": True, "messages": []}, "openrouter_error"
    )
    assert (row["outcome"], row["error_type"], row["mid_stream_error"]) == ("error", "server_error", True)


def test_groq_usage_under_x_groq(sidecar: Sidecar) -> None:
    row = via(
        sidecar,
        "api.groq.com",
        "/openai/v1/chat/completions",
        {"model": "llama-3.3-70b", "stream": True, "messages": []},
        "groq",
    )
    assert (row["provider"], row["input_tokens"], row["output_tokens"], row["usage_source"]) == (
        "groq",
        31,
        8,
        "provider",
    )
    assert row["provider_processing_ms"] == pytest.approx(798.4)


@pytest.mark.parametrize("host", ["api.deepseek.com", "api.mistral.ai", "api.x.ai"])
def test_openai_compatible_hosts(sidecar: Sidecar, host: str) -> None:
    row = via(
        sidecar,
        host,
        "/v1/chat/completions",
        {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "messages": []},
    )
    assert row["provider"] == {"api.deepseek.com": "deepseek", "api.mistral.ai": "mistral_ai", "api.x.ai": "x_ai"}[host]
    assert row["input_tokens"] == 31 and row["outcome"] == "ok"


def test_ollama_native_ndjson_on_an_intercepted_host(mock: Mock, tmp_path: Any) -> None:
    sc = start_sidecar(
        tmp_path / "data",
        mock,
        "--intercept",
        "ollama.internal:11434",
        "--connect-to",
        f"ollama.internal:11434:127.0.0.1:{mock.port}",
    )
    try:
        sid = session_id()
        request(
            "ollama.internal",
            11434,
            "/api/chat",
            {"model": "llama3.2", "messages": []},
            {"x-llmtap-session": sid},
            sc.bundle,
            proxy=("127.0.0.1", sc.listen),
        )
        row = sc.row(sid)
        assert (row["provider"], row["api"], row["request_model"]) == ("ollama", "ollama.chat", "llama3.2")
        assert (row["input_tokens"], row["output_tokens"], row["content_events"]) == (26, 282, 5)
        assert row["provider_processing_ms"] == pytest.approx(4883.583458) and row["outcome"] == "ok"
        sid = session_id()
        request(
            "ollama.internal",
            11434,
            "/api/generate",
            {"model": "llama3.2", "prompt": "x"},
            {"x-llmtap-session": sid, "x-mock-scenario": "mid_stream_error"},
            sc.bundle,
            proxy=("127.0.0.1", sc.listen),
        )
        row = sc.row(sid)
        assert (row["api"], row["outcome"], row["mid_stream_error"]) == ("ollama.generate", "error", True)
    finally:
        stop(sc.proc)


def test_base_url_mode_with_the_sdks(sidecar: Sidecar) -> None:
    """No proxy, no CA: the SDKs talk plain HTTP to the sidecar, which forwards over TLS."""
    sid = session_id()
    c = openai.OpenAI(
        api_key="sk-base-url",
        max_retries=0,
        base_url=f"http://127.0.0.1:{sidecar.listen}/openai/v1",
        http_client=openai.DefaultHttpxClient(trust_env=False),
    )
    text = "".join(
        ch.choices[0].delta.content or ""
        for ch in c.chat.completions.create(
            model="gpt-4o",
            messages=[],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"x-llmtap-session": sid},
        )
        if ch.choices
    )
    assert text.startswith("The quick")
    row = sidecar.row(sid)
    assert (row["provider"], row["server_address"], row["input_tokens"], row["outcome"]) == (
        "openai",
        "api.openai.com",
        31,
        "ok",
    )
    sid = session_id()
    a = anthropic.Anthropic(
        api_key="sk-ant-base",
        max_retries=0,
        base_url=f"http://127.0.0.1:{sidecar.listen}/anthropic",
        http_client=anthropic.DefaultHttpxClient(trust_env=False),
    )
    with a.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=50,
        messages=[{"role": "user", "content": "x"}],
        extra_headers={"x-llmtap-session": sid},
    ) as s:
        assert s.get_final_text().startswith("The quick")
    row = sidecar.row(sid)
    assert (row["provider"], row["server_address"], row["input_tokens"]) == ("anthropic", "api.anthropic.com", 4628)


def test_base_url_mode_refuses_unknown_routes(sidecar: Sidecar) -> None:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", sidecar.listen, timeout=10)
    conn.request("POST", "/upstream/evil.example.com/v1/chat/completions", body=b"{}")
    resp = conn.getresponse()
    assert resp.status == 404 and b"no such base-URL route" in resp.read()
    conn.close()


def test_azure_filter_chunks_are_neither_usage_nor_content(sidecar: Sidecar) -> None:
    row = via(
        sidecar,
        "myres.openai.azure.com",
        "/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
        {"stream": True, "messages": []},
        "azure_filtered",
        **{"api-key": "azkey"},
    )
    assert row["content_events"] == 3  # the prompt-filter chunk, the role chunk and the annotations are not content
    assert (row["finish_reason"], row["finish_reason_raw"]) == ("content_filter", "content_filter")
    assert (row["response_id"], row["response_model"]) == ("chatcmpl-mock123", "gpt-4o-mini")  # not the blank ""
    assert row["usage_source"] == "estimated" and row["outcome"] == "ok"
    assert (row["request_id"], row["ratelimit_remaining_requests"]) == ("apim-1", 99)


def test_deepseek_cache_hit_tokens(sidecar: Sidecar) -> None:
    row = via(
        sidecar,
        "api.deepseek.com",
        "/chat/completions",
        {"model": "deepseek-chat", "stream": True, "stream_options": {"include_usage": True}, "messages": []},
        "deepseek",
    )
    assert (row["provider"], row["input_tokens"], row["cache_read_tokens"], row["output_tokens"]) == (
        "deepseek",
        14,
        10,
        8,
    )


def test_unknown_api_is_still_recorded(sidecar: Sidecar) -> None:
    row = via(sidecar, "api.openai.com", "/v1/moderations", {"input": "x"})
    assert (row["api"], row["provider"], row["status_code"], row["outcome"]) == ("", "openai", 404, "error")
    assert row["response_bytes"] > 0 and row["duration_ms"] > 0 and row["ttfb_ms"] is not None


def test_sigv4_signed_attribution_headers_are_kept(sidecar: Sidecar, mock: Mock) -> None:
    """boto3 signs every header it sends: removing a signed x-llmtap-* header would void the signature."""
    auth = (
        "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20261129/us-east-1/bedrock/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-llmtap-feature, Signature=abc"
    )
    row = via(
        sidecar,
        "bedrock-runtime.us-east-1.amazonaws.com",
        "/model/amazon.nova-pro-v1:0/converse",
        {},
        authorization=auth,
        **{"x-llmtap-feature": "signed-feature", "x-llmtap-user": "u-unsigned"},
    )
    assert (row["feature"], row["user_id"]) == ("signed-feature", "u-unsigned")  # both read
    seen = [r for r in mock.requests() if r["path"].endswith("/converse") and "authorization" in r["headers"]]
    assert seen[-1]["headers"].get("x-llmtap-feature") == "signed-feature"  # signed: forwarded untouched
    assert "x-llmtap-user" not in seen[-1]["headers"]  # not signed: stripped as usual
