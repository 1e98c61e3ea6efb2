"""``llmtap mock-provider``: an HTTPS server replaying realistic LLM API responses.

It serves the OpenAI (chat, responses, completions, embeddings), Anthropic (messages),
Gemini, Bedrock (event-stream) and Ollama (NDJSON) wire formats with real pacing and faults, over TLS with a certificate
valid for the providers' host names (issued by its own CA, written to
``--cert-dir``). Point llmtap at it with ``--connect-to api.openai.com:443:127.0.0.1:PORT
--upstream-ca <cert-dir>/mock-ca.pem``; clients keep their real base URLs.

A scenario is picked by the ``x-mock-scenario`` request header, else by a model
name of the form ``mock-<scenario>``; ``x-mock-delay-ms`` sets the gap between
events (default 5 ms, or ``$LLMTAP_MOCK_DELAY_MS``), ``x-mock-events`` the number of content events
of a chat stream (default 8, or ``$LLMTAP_MOCK_EVENTS``), ``x-mock-stamp: 1`` prefixes each event
with an SSE comment carrying its send time. ``GET /_mock/requests`` returns the headers of the last
requests received (to check what reached "upstream").
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import gzip
import json
import os
import ssl
import sys
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MOCK_HOSTS = (
    "api.openai.com",
    "api.anthropic.com",
    "localhost",
    "*.openai.azure.com",
    "openrouter.ai",
    "api.groq.com",
    "api.deepseek.com",
    "api.mistral.ai",
    "api.x.ai",
    "generativelanguage.googleapis.com",
    "*.googleapis.com",
    "aiplatform.googleapis.com",
    "*.us-east-1.amazonaws.com",
    "ollama.internal",
)
# Every host the mock can stand in for (llmtap run --connect-to HOST:443:127.0.0.1:PORT for each).
MOCKED_HOSTS = (
    "api.openai.com",
    "api.anthropic.com",
    "generativelanguage.googleapis.com",
    "us-central1-aiplatform.googleapis.com",
    "bedrock-runtime.us-east-1.amazonaws.com",
    "myres.openai.azure.com",
    "openrouter.ai",
    "api.groq.com",
    "api.deepseek.com",
    "api.mistral.ai",
    "api.x.ai",
)
CREATED = 1764400000  # fixed: replies are byte-for-byte reproducible
WORDS = [
    "The",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "while",
    "llamas",
    "watch",
    "—",
    "naïve",
    "café",
    "日本語",
    "✓",
]


@dataclass
class Reply:
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)  # written one by one, `delay` apart
    delay: float = 0.005
    abort: bool = False  # close the connection instead of ending the body
    stamp: bool = False  # prefix each chunk with an SSE comment carrying the send time
    stream: bool = False  # chunked and paced even when the content type is not SSE


# -- TLS ----------------------------------------------------------------------------


def ensure_certs(cert_dir: Path) -> tuple[Path, Path, Path]:
    """(ca cert, leaf cert, leaf key) in cert_dir, created once."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    cert_dir.mkdir(parents=True, exist_ok=True)
    ca_path, crt_path, key_path = (
        cert_dir / "mock-ca.pem",
        cert_dir / "mock-leaf.pem",
        cert_dir / "mock-leaf.key",
    )
    if ca_path.exists() and crt_path.exists() and key_path.exists():
        return ca_path, crt_path, key_path
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llmtap mock provider CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    import ipaddress

    sans: list[x509.GeneralName] = [x509.DNSName(h) for h in MOCK_HOSTS]
    sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llmtap mock provider")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    crt_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return ca_path, crt_path, key_path


# -- wire helpers ---------------------------------------------------------------------


def sse(obj: Any, event: str | None = None, eol: str = "\n") -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}{eol}" if event else ""
    return f"{head}data: {data}{eol}{eol}".encode()


def words(n: int) -> list[str]:
    return [(" " if i else "") + WORDS[i % len(WORDS)] for i in range(n)]


def json_reply(status: int, obj: Any, headers: list[tuple[str, str]] | None = None) -> Reply:
    body = json.dumps(obj).encode()
    return Reply(status, [("content-type", "application/json"), *(headers or [])], [body])


SSE_HEADERS = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]
OPENAI_HEADERS = [
    ("x-request-id", "req_mock_openai_1"),
    ("openai-processing-ms", "42"),
    ("x-ratelimit-remaining-requests", "4999"),
    ("x-ratelimit-remaining-tokens", "159000"),
]
ANTHROPIC_HEADERS = [
    ("request-id", "req_mock_anthropic_1"),
    ("anthropic-ratelimit-requests-remaining", "49"),
    ("anthropic-ratelimit-tokens-remaining", "39000"),
]


# -- OpenAI chat -------------------------------------------------------------------------


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
    usage = _chat_usage(31, n)
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
    base = {
        "id": "chatcmpl-mock123",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": resp_model,
        "system_fingerprint": "fp_mock",
    }
    text = words(n)
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

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(
            {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                **usage_key,
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
        events.append(sse({**base, "choices": [], "usage": usage}, eol=eol))
    events.append(sse("[DONE]", eol=eol))
    return _shape(Reply(200, SSE_HEADERS + OPENAI_HEADERS, events), scenario)


def _shape(reply: Reply, scenario: str) -> Reply:
    """Apply the wire-level scenarios: compression, CRLF split, split UTF-8, pacing."""
    out: list[bytes] = []
    if scenario == "gzip":
        comp = zlib.compressobj(wbits=31)
        out = [comp.compress(c) + comp.flush(zlib.Z_SYNC_FLUSH) for c in reply.chunks]
        out.append(comp.flush())
        reply.chunks = out
        reply.headers = [*reply.headers, ("content-encoding", "gzip")]
    elif scenario == "crlf":
        # Split every event between its final CR and LF.
        for c in reply.chunks:
            out += [c[:-1], c[-1:]]
        reply.chunks = out
    elif scenario == "split_utf8":
        data = b"".join(reply.chunks)
        i = 0
        while i < len(data):
            j = min(i + 7, len(data))  # 7-byte slices cut through multi-byte characters
            out.append(data[i:j])
            i = j
        reply.chunks = out
        reply.delay = 0.001
    elif scenario == "paced":
        reply.stamp = True
        reply.delay = 0.3
    elif scenario == "slow":
        reply.delay = 0.2
    return reply


# -- OpenAI responses / completions / embeddings ---------------------------------------------


def openai_responses(body: dict[str, Any], scenario: str) -> Reply:
    model = body.get("model", "gpt-4.1")
    resp: dict[str, Any] = {
        "id": "resp_mock456",
        "object": "response",
        "created_at": CREATED,
        "status": "in_progress",
        "model": f"{model}-2025-04-14",
        "output": [],
        "error": None,
        "incomplete_details": None,
        "usage": None,
    }
    usage = {
        "input_tokens": 12033,
        "input_tokens_details": {"cached_tokens": 11904},
        "output_tokens": 44,
        "output_tokens_details": {"reasoning_tokens": 12},
        "total_tokens": 12077,
    }
    text = words(6)
    done = {
        **resp,
        "status": "completed",
        "usage": usage,
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "".join(text)}],
            }
        ],
    }
    if not body.get("stream"):
        return json_reply(200, done, OPENAI_HEADERS)
    seq = iter(range(1000))
    ev = [
        sse({"type": "response.created", "sequence_number": next(seq), "response": resp}, "response.created"),
        sse(
            {"type": "response.in_progress", "sequence_number": next(seq), "response": resp},
            "response.in_progress",
        ),
    ]
    if scenario == "failed_rate_limit":
        failed = {
            **resp,
            "status": "failed",
            "error": {
                "code": "rate_limit_exceeded",
                "message": "Rate limit reached for gpt-4.1 in organization org-AAA on tokens per min (TPM): "
                "Limit 30000, Used 22999, Requested 12528. Please try again in 11.054s.",
            },
        }
        ev.append(
            sse(
                {"type": "response.failed", "sequence_number": next(seq), "response": failed},
                "response.failed",
            )
        )
        return Reply(200, SSE_HEADERS + OPENAI_HEADERS, ev)
    ev.append(
        sse(
            {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
            },
            "response.output_item.added",
        )
    )
    for t in text:
        ev.append(
            sse(
                {
                    "type": "response.output_text.delta",
                    "sequence_number": next(seq),
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": t,
                    "logprobs": [],
                },
                "response.output_text.delta",
            )
        )
    ev.append(
        sse(
            {"type": "response.completed", "sequence_number": next(seq), "response": done},
            "response.completed",
        )
    )
    return _shape(Reply(200, SSE_HEADERS + OPENAI_HEADERS, ev), scenario)


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
    return _shape(Reply(200, SSE_HEADERS + OPENAI_HEADERS, ev), scenario)


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


# -- Anthropic ---------------------------------------------------------------------------------------


def anthropic_messages(body: dict[str, Any], scenario: str) -> Reply:
    model = body.get("model", "claude-sonnet-4-5")
    resp_model = "claude-sonnet-4-5-20250929" if model == "claude-sonnet-4-5" else model
    if scenario == "overloaded_529":
        return json_reply(
            529,
            {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
                "request_id": "req_mock_529",
            },
            [("request-id", "req_mock_529")],
        )
    if scenario == "credit_low":
        return json_reply(
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "Your credit balance is too low to access the Anthropic API. "
                    "Please go to Plans & Billing to upgrade or purchase credits.",
                },
                "request_id": "req_mock_400",
            },
        )
    usage = {
        "input_tokens": 28,
        "cache_creation_input_tokens": 1200,
        "cache_read_input_tokens": 3400,
        "cache_creation": {"ephemeral_5m_input_tokens": 1200, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 1,
        "service_tier": "standard",
    }
    text = words(7)
    msg: dict[str, Any] = {
        "id": "msg_mock01",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": resp_model,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    if not body.get("stream"):
        return json_reply(
            200,
            {
                **msg,
                "content": [{"type": "text", "text": "".join(text)}],
                "stop_reason": "end_turn",
                "usage": {**usage, "output_tokens": 7},
            },
            ANTHROPIC_HEADERS,
        )
    ev = [
        sse({"type": "message_start", "message": msg}, "message_start"),
        sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        ),
        sse({"type": "ping"}, "ping"),
    ]
    for i, t in enumerate(text):
        ev.append(
            sse(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
                "content_block_delta",
            )
        )
        if i == 2:
            ev.append(sse({"type": "ping"}, "ping"))
    if scenario == "overloaded_mid_stream":
        ev = [*ev[:6], sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error")]
        return Reply(200, SSE_HEADERS + ANTHROPIC_HEADERS, ev)
    ev += [
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 7},
            },
            "message_delta",
        ),
        sse({"type": "message_stop"}, "message_stop"),
    ]
    return _shape(Reply(200, SSE_HEADERS + ANTHROPIC_HEADERS, ev), scenario)


# -- Gemini / Vertex ---------------------------------------------------------------------------------


def gemini(path: str, body: dict[str, Any], scenario: str) -> Reply:
    model = path.split("/models/")[-1].split(":")[0] if "/models/" in path else "gemini-2.0-flash"
    if scenario == "quota_per_minute":
        return json_reply(
            429,
            {
                "error": {
                    "code": 429,
                    "status": "RESOURCE_EXHAUSTED",
                    "message": "You exceeded your current quota, please check your plan and billing details.",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                            "violations": [
                                {
                                    "quotaMetric": "generativelanguage.googleapis.com/free_tier_requests",
                                    "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                                }
                            ],
                        }
                    ],
                }
            },
        )
    if scenario == "quota_per_day":
        return json_reply(
            429,
            {
                "error": {
                    "code": 429,
                    "status": "RESOURCE_EXHAUSTED",
                    "message": "You exceeded your current quota.",
                    "details": [{"violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}],
                }
            },
        )
    text = words(6)
    chunks = []
    for i, t in enumerate(text):
        chunk: dict[str, Any] = {
            "candidates": [{"content": {"parts": [{"text": t}], "role": "model"}, "index": 0}],
            "usageMetadata": {"promptTokenCount": 120, "cachedContentTokenCount": 100, "totalTokenCount": 120},
            "modelVersion": model,
            "responseId": "gemini-resp-1",
        }
        if i == len(text) - 1:
            chunk["candidates"][0]["finishReason"] = "STOP"
            chunk["usageMetadata"] = {
                "promptTokenCount": 120,
                "cachedContentTokenCount": 100,
                "candidatesTokenCount": 6,
                "thoughtsTokenCount": 30,
                "totalTokenCount": 156,
            }
        chunks.append(chunk)
    if scenario == "mid_stream_error":
        chunks = [
            *chunks[:3],
            {"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}},
        ]
    if ":streamGenerateContent" not in path:
        merged = {
            **chunks[-1],
            "candidates": [
                {"content": {"parts": [{"text": "".join(text)}], "role": "model"}, "finishReason": "STOP", "index": 0}
            ],
        }
        return json_reply(200, merged)
    if "alt=sse" in path:
        return _shape(Reply(200, SSE_HEADERS, [sse(c) for c in chunks]), scenario)
    # a streamed JSON array, one element per write
    parts = [("[" if i == 0 else ",\r\n") + json.dumps(c) for i, c in enumerate(chunks)]
    return Reply(
        200, [("content-type", "application/json; charset=UTF-8")], [p.encode() for p in [*parts, "]"]], stream=True
    )


# -- AWS Bedrock (event-stream) ---------------------------------------------------------------------

EVENTSTREAM = [("content-type", "application/vnd.amazon.eventstream"), ("x-amzn-requestid", "req-bedrock-1")]


def _ev(event: str, payload: dict[str, Any], kind: str = "event") -> bytes:
    from .framing import encode_event

    key = ":event-type" if kind == "event" else ":exception-type"
    return encode_event(
        {":message-type": kind, key: event, ":content-type": "application/json"}, json.dumps(payload).encode()
    )


def bedrock(path: str, body: dict[str, Any], scenario: str) -> Reply:
    text = words(5)
    if path.rstrip("/").endswith("/converse-stream"):
        frames = [_ev("messageStart", {"role": "assistant"})]
        frames += [_ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": t}}) for t in text]
        if scenario == "throttled_mid_stream":
            frames = [
                *frames[:3],
                _ev("throttlingException", {"message": "Too many requests, please wait."}, "exception"),
            ]
            return Reply(200, EVENTSTREAM, frames, stream=True)
        frames += [
            _ev("contentBlockStop", {"contentBlockIndex": 0}),
            _ev("messageStop", {"stopReason": "end_turn"}),
            _ev(
                "metadata",
                {
                    "usage": {
                        "inputTokens": 25,
                        "outputTokens": 5,
                        "totalTokens": 30,
                        "cacheReadInputTokens": 10,
                        "cacheWriteInputTokens": 0,
                    },
                    "metrics": {"latencyMs": 812},
                },
            ),
        ]
        return Reply(200, EVENTSTREAM, frames, stream=True)
    if path.rstrip("/").endswith("/invoke-with-response-stream"):
        anthropic = anthropic_messages({**body, "stream": True, "model": "claude-3-5-sonnet"}, "default")
        frames = []
        for chunk in anthropic.chunks:
            data = chunk.decode().split("data: ", 1)[1].strip()
            frames.append(_ev("chunk", {"bytes": base64.b64encode(data.encode()).decode()}))
        return Reply(200, EVENTSTREAM, frames, stream=True)
    if scenario == "throttled":
        return json_reply(
            429,
            {"message": "Too many requests, please wait before trying again."},
            [("x-amzn-errortype", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")],
        )
    return json_reply(
        200,
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "".join(text)}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 25, "outputTokens": 5, "totalTokens": 30},
            "metrics": {"latencyMs": 640},
        },
        [("x-amzn-requestid", "req-bedrock-2")],
    )


# -- Ollama native (NDJSON) -------------------------------------------------------------------------------


def ollama(path: str, body: dict[str, Any], scenario: str) -> Reply:
    model = body.get("model", "llama3.2")
    key = "message" if path.endswith("/api/chat") else "response"
    lines = []
    for t in words(5):
        part: dict[str, Any] = {"model": model, "created_at": "2026-11-29T08:52:19.385406455Z", "done": False}
        part[key] = {"role": "assistant", "content": t} if key == "message" else t
        lines.append(part)
    if scenario == "mid_stream_error":
        lines = [*lines[:2], {"error": "model runner has unexpectedly stopped"}]
    else:
        lines.append(
            {
                "model": model,
                "created_at": "2026-11-29T08:52:20Z",
                "done": True,
                "done_reason": "stop",
                key: {"role": "assistant", "content": ""} if key == "message" else "",
                "total_duration": 4883583458,
                "load_duration": 1334875,
                "prompt_eval_count": 26,
                "prompt_eval_duration": 342546000,
                "eval_count": 282,
                "eval_duration": 4535599000,
            }
        )
    if body.get("stream") is False:
        return json_reply(
            200,
            {
                **lines[-1],
                key: {"role": "assistant", "content": "".join(words(5))} if key == "message" else "".join(words(5)),
            },
        )
    return Reply(
        200, [("content-type", "application/x-ndjson")], [json.dumps(x).encode() + b"\n" for x in lines], stream=True
    )


ROUTES: list[tuple[str, Callable[[dict[str, Any], str], Reply]]] = [
    ("/chat/completions", openai_chat),
    ("/responses", openai_responses),
    ("/completions", openai_completions),
    ("/embeddings", openai_embeddings),
    ("/messages", anthropic_messages),
]


def plan(path: str, headers: dict[str, str], body: dict[str, Any]) -> Reply:
    p = path.split("?", 1)[0].rstrip("/")
    scenario = headers.get("x-mock-scenario", "")
    model = str(body.get("model", ""))
    if not scenario and model.startswith("mock-"):
        scenario = model[5:]
    path_aware: Callable[[str, dict[str, Any], str], Reply] | None = None
    if ":generateContent" in p or ":streamGenerateContent" in p:
        path_aware = gemini
    elif "/model/" in p:
        path_aware = bedrock
    elif p.endswith(("/api/chat", "/api/generate")):
        path_aware = ollama
    if path_aware is not None:
        reply = path_aware(path, body, scenario or "default")
        if "x-mock-delay-ms" in headers:
            reply.delay = float(headers["x-mock-delay-ms"]) / 1000.0
        return reply
    for suffix, fn in ROUTES:
        if p.endswith(suffix):
            events = headers.get("x-mock-events") or os.environ.get("LLMTAP_MOCK_EVENTS")
            if events:  # benchmarks: stream length
                body = {**body, "_mock_events": max(1, min(int(events), 10_000))}
            reply = fn(body, scenario or "default")
            delay = headers.get("x-mock-delay-ms") or os.environ.get("LLMTAP_MOCK_DELAY_MS")
            if delay:  # per request, or a default for clients that cannot send headers (gateways)
                reply.delay = float(delay) / 1000.0
            if headers.get("x-mock-stamp") == "1":  # benchmarks: each event carries its send time
                reply.stamp = True
            return reply
    return json_reply(404, {"error": {"message": f"no mock route for {path}", "type": "not_found_error"}})


# -- server -----------------------------------------------------------------------------------------


class MockServer:
    def __init__(self) -> None:
        self.requests: deque[dict[str, Any]] = deque(maxlen=200)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                raw = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                if headers.get("content-encoding") == "gzip":
                    raw = gzip.decompress(raw)
                self.requests.append(
                    {
                        "method": method,
                        "path": path,
                        "headers": headers,
                        "body": raw.decode("utf-8", "replace"),
                    }
                )
                if path.startswith("/_mock/requests"):
                    reply = json_reply(200, list(self.requests))
                else:
                    try:
                        body = json.loads(raw) if raw else {}
                    except ValueError:
                        body = {}
                    reply = plan(path, headers, body if isinstance(body, dict) else {})
                await self.send(writer, reply)
                if reply.abort:
                    writer.transport.abort()
                    return
                if headers.get("connection", "").lower() == "close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def send(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            429: "Too Many Requests",
            529: "Overloaded",
        }
        head = [f"HTTP/1.1 {reply.status} {reason.get(reply.status, 'Status')}"]
        streaming = reply.stream or any(k == "content-type" and "event-stream" in v for k, v in reply.headers)
        head += [f"{k}: {v}" for k, v in reply.headers]
        head.append("date: Sat, 29 Nov 2025 07:06:40 GMT")  # fixed, like every other byte
        if streaming:
            head.append("transfer-encoding: chunked")
        else:
            head.append(f"content-length: {sum(len(c) for c in reply.chunks)}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        if not streaming:
            writer.write(b"".join(reply.chunks))
            await writer.drain()
            return
        await writer.drain()
        for i, c in enumerate(reply.chunks):
            if i:
                await asyncio.sleep(reply.delay)
            if reply.stamp:
                c = f": sent_at={time.time():.6f}\n".encode() + c
            if c:
                writer.write(f"{len(c):x}\r\n".encode() + c + b"\r\n")
                await writer.drain()
        if not reply.abort:
            writer.write(b"0\r\n\r\n")
            await writer.drain()


async def _main(host: str, port: int, cert_dir: Path) -> None:
    ca, crt, key = ensure_certs(cert_dir)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(crt, key)
    ctx.set_alpn_protocols(["http/1.1"])
    mock = MockServer()
    server = await asyncio.start_server(mock.handle, host, port, ssl=ctx)
    bound = server.sockets[0].getsockname()
    print(json.dumps({"host": bound[0], "port": bound[1], "ca": str(ca.resolve())}), flush=True)
    async with server:
        await server.serve_forever()


def serve(host: str, port: int, cert_dir: Path) -> int:
    try:
        asyncio.run(_main(host, port, cert_dir))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    serve("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0, Path("./llmtap-mock"))
