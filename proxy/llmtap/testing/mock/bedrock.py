"""AWS Bedrock Runtime: Converse / ConverseStream and InvokeModel streams (binary event-stream)."""

from __future__ import annotations

import base64
import json
from typing import Any

from ...decode import encode_event
from .anthropic import anthropic_messages
from .common import Reply, json_reply, words

# -- AWS Bedrock (event-stream) ---------------------------------------------------------------------

EVENTSTREAM = [("content-type", "application/vnd.amazon.eventstream"), ("x-amzn-requestid", "req-bedrock-1")]


def _ev(event: str, payload: dict[str, Any], kind: str = "event") -> bytes:
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
