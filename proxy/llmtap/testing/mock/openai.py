"""OpenAI wire formats: Chat Completions (and the OpenAI-compatible servers), Completions, Embeddings, and the
garbage streams (the Responses API: :mod:`.responses`)."""

from __future__ import annotations

from typing import Any

from .common import CREATED, OPENAI_HEADERS, SSE_HEADERS, Reply, json_reply, obfuscation, shape, sse, words
from .jsonmode import chat_json, pieces

# -- OpenAI chat -------------------------------------------------------------------------


def served_tier(body: dict[str, Any]) -> str:
    """The tier OpenAI reports as having served the request: the one asked for (``auto`` and none
    are served at ``default``), unless ``x-mock-served-tier`` says otherwise (a flex request served
    at the default tier when flex capacity is short)."""
    asked = str(body.get("service_tier") or "auto")
    return str(body.get("_mock_served_tier") or ("default" if asked == "auto" else asked))


def _chat_usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
    }


GARBAGE: dict[str, bytes] = {
    "garbage_2mb_line": b"data: " + b"x" * (2 * 1024 * 1024) + b"\n\n",
    "garbage_nul": b'data: {"choices":[{"delta":{"content":"a\x00b"}}]}\x00\x00\n\n\x00\n\n',
    "garbage_invalid_utf8": b'data: \xff\xfe\xc3\x28 {"choices": \xa0\xa1}\n\n',
    "garbage_truncated_json": b'data: {"id":"x","choices":[{"delta":{"content":"hi"\n\n',
    "garbage_non_json": b"data: hello, this is not json\n\nevent: weird\ndata: [1,2,\n\n",
}


def garbage(scenario: str) -> Reply:
    """Malformed streams: the proxy must pass them through untouched and stay healthy."""
    head = sse(
        {
            "id": "chatcmpl-garbage",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}],
        }
    )
    return Reply(200, SSE_HEADERS + OPENAI_HEADERS, [head, GARBAGE[scenario], sse("[DONE]")])


def openai_chat(body: dict[str, Any], scenario: str) -> Reply:
    if scenario in GARBAGE:
        return garbage(scenario)
    if scenario == "garbage_json_body":
        return Reply(200, [("content-type", "application/json"), *OPENAI_HEADERS], [b'{"id": "x", "choices": [tru'])
    model = body.get("model", "gpt-4o-mini")
    resp_model = "gpt-4o-2024-08-06" if model == "gpt-4o" else model
    include_usage = (body.get("stream_options") or {}).get("include_usage") is True
    n = int(body.get("_mock_events", 8))
    usage = _chat_usage(int(body.get("_mock_prompt_tokens", 31)), n)
    if scenario == "deepseek":
        usage = {
            "prompt_tokens": 14,
            "completion_tokens": 8,
            "total_tokens": 22,
            "prompt_tokens_details": {"cached_tokens": 0},
            "prompt_cache_hit_tokens": 10,
            "prompt_cache_miss_tokens": 4,
        }
    if scenario == "cached_reasoning":
        usage = _chat_usage(2048, 96, cached=1024, reasoning=64)
    if scenario == "rate_limit_429":
        return json_reply(
            429,
            {
                "error": {
                    "message": "Rate limit reached for gpt-4o in organization org-mock on tokens per min (TPM): "
                    "Limit 30000, Used 29000, Requested 1500. Please try again in 1.5s.",
                    "type": "tokens",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
            [
                ("x-request-id", "req_mock_429"),
                ("retry-after-ms", "1500"),
                ("x-ratelimit-remaining-tokens", "0"),
            ],
        )
    if scenario == "quota_429":
        return json_reply(
            429,
            {
                "error": {
                    "message": "You exceeded your current quota, please check your plan and billing details.",
                    "type": "insufficient_quota",
                    "param": None,
                    "code": "insufficient_quota",
                }
            },
            [("x-request-id", "req_mock_quota")],
        )
    if isinstance(body.get("_mock_usage"), dict):  # x-mock-usage: the provider's usage fields to report
        usage = {**usage, **body["_mock_usage"]}
    base = {
        "id": "chatcmpl-mock123",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": resp_model,
        "service_tier": served_tier(body),
        "system_fingerprint": "fp_mock",
    }
    as_json = chat_json(body)  # response_format json_object / json_schema
    text = pieces(as_json, n) if as_json is not None else words(n)
    tool = scenario == "tool_calls"
    if not body.get("stream"):
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": None if tool else "".join(text),
            "refusal": None,
        }
        if tool:
            msg["tool_calls"] = [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ]
        return json_reply(
            200,
            {
                **base,
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": msg,
                        "logprobs": None,
                        "finish_reason": "tool_calls" if tool else "stop",
                    }
                ],
                "usage": usage,
            },
            OPENAI_HEADERS,
        )
    eol = "\r\n" if scenario == "crlf" else "\n"
    usage_key: dict[str, Any] = {"usage": None} if include_usage else {}

    pad = obfuscation(body)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(
            {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                **usage_key,
                **pad(),
            },
            eol=eol,
        )

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if tool:
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ]
                }
            )
        )
        for part in ('{"city"', ':"Paris"}'):
            events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}))
    else:
        events += [chunk({"content": t}) for t in text]
    if scenario == "openrouter_error":  # OpenRouter: an in-band error chunk with finish_reason "error"
        events = [
            *events[:3],
            sse(
                {
                    **base,
                    "provider": "Mock",
                    "error": {"code": "server_error", "message": "Provider disconnected unexpectedly"},
                    "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
                }
            ),
        ]
        return Reply(200, SSE_HEADERS, [b": OPENROUTER PROCESSING\n\n", *events])
    if scenario == "mid_stream_error":
        events = [
            *events[:4],
            sse(
                {
                    "error": {
                        "message": "The server had an error while processing your request. Sorry about that!",
                        "type": "server_error",
                    }
                }
            ),
        ]
        return Reply(200, SSE_HEADERS + OPENAI_HEADERS, events)
    if scenario == "disconnect":
        return Reply(200, SSE_HEADERS + OPENAI_HEADERS, events[:4], abort=True)
    if scenario == "azure_filtered":  # Azure: prompt filter results first, a filtered finish, annotations after
        filt = {"hate": {"filtered": False, "severity": "safe"}, "violence": {"filtered": True, "severity": "high"}}
        blank = {"choices": [], "created": 0, "id": "", "model": "", "object": ""}
        return Reply(
            200,
            [*SSE_HEADERS, ("apim-request-id", "apim-1"), ("x-ratelimit-remaining-requests", "99")],
            [
                sse({**blank, "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": filt}]}),
                *events[:4],
                sse(
                    {
                        **base,
                        "choices": [
                            {"index": 0, "delta": {}, "finish_reason": "content_filter", "content_filter_results": filt}
                        ],
                    }
                ),
                sse(
                    {
                        **blank,
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": None,
                                "content_filter_results": filt,
                                "content_filter_offsets": {"check_offset": 0, "start_offset": 0, "end_offset": 20},
                            }
                        ],
                    }
                ),
                sse("[DONE]"),
            ],
        )
    if scenario == "groq":  # usage under x_groq on the final chunk, with Groq's timings
        events.append(
            sse(
                {
                    **base,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    "x_groq": {
                        "id": "req_groq_1",
                        "usage": {
                            **usage,
                            "queue_time": 0.0613,
                            "prompt_time": 0.0002,
                            "completion_time": 0.7981,
                            "total_time": 0.7984,
                        },
                    },
                }
            )
        )
        events.append(sse("[DONE]"))
        return Reply(200, SSE_HEADERS, events)
    events.append(chunk({}, "tool_calls" if tool else "stop"))
    if scenario == "openrouter":  # processing comments, and usage with the provider's own cost, always sent
        events = [b": OPENROUTER PROCESSING\n\n", *events[:2], b": OPENROUTER PROCESSING\n\n", *events[2:]]
        events.append(sse({**base, "choices": [], "usage": {**usage, "cost": 0.00042}}))
    elif include_usage:
        events.append(sse({**base, "choices": [], "usage": usage, **pad()}, eol=eol))
    events.append(sse("[DONE]", eol=eol))
    return shape(Reply(200, SSE_HEADERS + OPENAI_HEADERS, events), scenario)


# -- OpenAI completions / embeddings ------------------------------------------------------------


def openai_completions(body: dict[str, Any], scenario: str) -> Reply:
    model = body.get("model", "gpt-3.5-turbo-instruct")
    base = {"id": "cmpl-mock789", "object": "text_completion", "created": CREATED, "model": model}
    text = words(5)
    usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    if not body.get("stream"):
        return json_reply(
            200,
            {
                **base,
                "choices": [{"index": 0, "text": "".join(text), "finish_reason": "length", "logprobs": None}],
                "usage": usage,
            },
            OPENAI_HEADERS,
        )
    ev = [sse({**base, "choices": [{"index": 0, "text": t, "finish_reason": None, "logprobs": None}]}) for t in text]
    ev.append(sse({**base, "choices": [{"index": 0, "text": "", "finish_reason": "length", "logprobs": None}]}))
    ev.append(sse("[DONE]"))
    return shape(Reply(200, SSE_HEADERS + OPENAI_HEADERS, ev), scenario)


def openai_embeddings(body: dict[str, Any], scenario: str) -> Reply:
    inputs = body.get("input")
    items = inputs if isinstance(inputs, list) else [inputs]
    return json_reply(
        200,
        {
            "object": "list",
            "model": body.get("model", "text-embedding-3-small"),
            "data": [{"object": "embedding", "index": i, "embedding": [0.0125, -0.5, 0.25]} for i in range(len(items))],
            "usage": {"prompt_tokens": 8 * len(items), "total_tokens": 8 * len(items)},
        },
        OPENAI_HEADERS,
    )
