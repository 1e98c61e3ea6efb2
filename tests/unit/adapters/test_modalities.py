"""Modality subsets and server-side tools, per API (issue #27): recorded responses where public recordings
exist (tests/corpus, PROVENANCE.md), the providers' documented shapes otherwise (each says where from)."""

from __future__ import annotations

import json
from typing import Any

from corpus import check
from llmtap.adapters.openai_realtime import parse_realtime_usage
from llmtap.testing import builders

SSE = [("content-type", "text/event-stream")]
JSON = [("content-type", "application/json")]


def sse(*events: tuple[str, dict[str, Any]]) -> list[bytes]:
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]


def test_chat_audio_input_recorded() -> None:
    # openai/chat_audio_input.json: usage.prompt_tokens 21 with prompt_tokens_details {audio 2, text 19,
    # image 0}, completion 1 with completion_tokens_details.audio_tokens 0.
    check(
        "openai/chat_audio_input.json",
        {
            "input_tokens": 21,
            "input_audio_tokens": 2,
            "input_image_tokens": 0,
            "output_tokens": 1,
            "output_audio_tokens": 0,
            "server_tool_calls": {},
            "finish_reason": "stop",
        },
    )


def test_responses_with_only_a_hosted_web_search_is_not_a_tool_call_finish() -> None:
    # openai/responses_web_search.json: status completed, output [web_search_call, message]: the search ran on
    # OpenAI's side, nothing is left for the client (issue #31's defect): finish stop, one billed web search.
    check(
        "openai/responses_web_search.json",
        {
            "finish_reason": "stop",
            "finish_reason_raw": "completed",
            "tool_calls": 0,
            "server_tool_calls": {"web_search": 1},
            "input_tokens": 312,
            "output_tokens": 181,
        },
    )


def test_responses_stream_hosted_and_client_tools_apart() -> None:
    # Documented Responses stream events (platform.openai.com/docs/api-reference/responses-streaming): a
    # file_search_call, a code_interpreter_call and an image_generation_call, then a function_call the client
    # must run; output_tokens_details.image_tokens as reported for image generation.
    items = [
        {"id": "fs_1", "type": "file_search_call", "status": "completed"},
        {"id": "ci_1", "type": "code_interpreter_call", "status": "completed"},
        {"id": "ig_1", "type": "image_generation_call", "status": "completed"},
        {"id": "fc_1", "type": "function_call", "name": "lookup", "arguments": "{}", "call_id": "c1"},
    ]
    usage = {
        "input_tokens": 900,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1300,
        "output_tokens_details": {"reasoning_tokens": 0, "image_tokens": 1056},
        "total_tokens": 2200,
    }
    events = [("response.output_item.added", {"type": "response.output_item.added", "output_index": i, "item": it})
              for i, it in enumerate(items)]  # fmt: skip
    done = {"id": "resp_1", "status": "completed", "model": "gpt-4.1", "output": items, "usage": usage}
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    r = builders.record("/v1/responses", {"model": "gpt-4.1", "stream": True}, 200, SSE, sse(*events))
    assert (r.tool_calls, r.finish_reason) == (1, "tool_calls")
    assert r.server_tool_calls == {"file_search": 1, "code_execution": 1, "image_generation": 1}
    assert (r.output_tokens, r.output_image_tokens) == (1300, 1056)


def test_chat_stream_with_audio_output() -> None:
    # Documented audio output chunks (platform.openai.com/docs/guides/audio, modalities ["text", "audio"]):
    # delta.audio {id, data, transcript}; the usage chunk's completion_tokens_details.audio_tokens.
    chunk = {"id": "c1", "model": "gpt-audio", "choices": [{"index": 0, "delta": {"audio": {"data": "AAAA"}}}]}
    usage = {
        "prompt_tokens": 40,
        "completion_tokens": 90,
        "total_tokens": 130,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 25, "text_tokens": 15},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 80, "text_tokens": 10},
    }
    last = {"id": "c1", "model": "gpt-audio", "choices": [], "usage": usage}
    stop = {"id": "c1", "model": "gpt-audio", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    body = {"model": "gpt-audio", "stream": True, "modalities": ["text", "audio"]}
    pieces = [f"data: {json.dumps(c)}\n\n".encode() for c in (chunk, stop, last)] + [b"data: [DONE]\n\n"]
    r = builders.record("/v1/chat/completions", body, 200, SSE, pieces)
    assert (r.input_tokens, r.input_audio_tokens, r.output_tokens, r.output_audio_tokens) == (40, 25, 90, 80)
    assert (r.content_events, r.finish_reason) == (1, "stop")


def test_gemini_modalities_and_grounding() -> None:
    # Documented UsageMetadata (ai.google.dev/api/generate-content#UsageMetadata: ModalityTokenCount lists) and a
    # grounded candidate (ai.google.dev/gemini-api/docs/google-search: groundingMetadata.webSearchQueries).
    obj = {
        "candidates": [
            {
                "content": {"parts": [{"text": "It rained."}], "role": "model"},
                "finishReason": "STOP",
                "groundingMetadata": {"webSearchQueries": ["weather Paris today"], "groundingChunks": []},
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 1200,
            "candidatesTokenCount": 30,
            "cachedContentTokenCount": 400,
            "promptTokensDetails": [
                {"modality": "TEXT", "tokenCount": 200},
                {"modality": "AUDIO", "tokenCount": 700},
                {"modality": "IMAGE", "tokenCount": 258},
                {"modality": "VIDEO", "tokenCount": 42},
            ],
            "cacheTokensDetails": [{"modality": "AUDIO", "tokenCount": 300}, {"modality": "TEXT", "tokenCount": 100}],
            "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 30}],
        },
        "modelVersion": "gemini-2.5-flash",
    }
    r = builders.record(
        "/v1beta/models/gemini-2.5-flash:generateContent", {"contents": []}, 200, JSON, [json.dumps(obj).encode()],
        host="generativelanguage.googleapis.com",
    )  # fmt: skip
    assert (r.input_tokens, r.input_audio_tokens, r.input_image_tokens, r.cache_read_audio_tokens) == (
        1200,
        700,
        300,
        300,
    )
    assert (r.server_tool_calls, r.tool_calls, r.finish_reason) == ({"grounding": 1}, 0, "stop")


def test_gemini_numeric_modality_enums() -> None:
    # Vertex REST with enum-encoding=int: Modality AUDIO = 4 (google.ai.generativelanguage.v1beta.Modality).
    from llmtap.adapters.gemini import parse_gemini_usage

    u = parse_gemini_usage({"promptTokenCount": 10, "promptTokensDetails": [{"modality": 4, "tokenCount": 6}]})
    assert (u.input, u.input_audio) == (10, 6)


def test_realtime_usage_modalities() -> None:
    # Documented response.done usage (platform.openai.com/docs/api-reference/realtime-server-events/response/done).
    u = parse_realtime_usage(
        {
            "input_tokens": 160,
            "output_tokens": 60,
            "input_token_details": {
                "text_tokens": 100,
                "audio_tokens": 50,
                "image_tokens": 10,
                "cached_tokens": 64,
                "cached_tokens_details": {"text_tokens": 40, "audio_tokens": 24},
            },
            "output_token_details": {"text_tokens": 12, "audio_tokens": 48},
        }
    )
    assert (u.input_audio, u.input_image, u.cache_read_audio, u.output_audio) == (50, 10, 24, 48)


def test_anthropic_server_tools_json_and_mcp_blocks() -> None:
    # Documented Messages response with server tools (docs.claude.com/en/docs/agents-and-tools/tool-use/
    # web-search-tool, web-fetch-tool): server_tool_use blocks, usage.server_tool_use counts win over blocks.
    obj = {
        "id": "msg_1",
        "type": "message",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "a"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_search", "input": {"query": "b"}},
            {"type": "server_tool_use", "id": "srvtoolu_3", "name": "web_fetch", "input": {"url": "https://x"}},
            {"type": "text", "text": "Done."},
        ],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 5000,
            "output_tokens": 300,
            "server_tool_use": {"web_search_requests": 2, "web_fetch_requests": 1},
        },
    }
    r = builders.record(
        "/v1/messages", {"model": "claude-sonnet-4-5"}, 200, JSON, [json.dumps(obj).encode()],
        host="api.anthropic.com", request_headers=("anthropic-version",),
    )  # fmt: skip
    assert (r.tool_calls, r.server_tool_calls, r.finish_reason) == (0, {"web_search": 2, "web_fetch": 1}, "stop")
