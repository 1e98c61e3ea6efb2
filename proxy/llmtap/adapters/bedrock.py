"""AWS Bedrock Runtime: Converse / ConverseStream and InvokeModel / InvokeModelWithResponseStream.

Streams are ``application/vnd.amazon.eventstream`` frames (decoded by the capture layer);
InvokeModel streams of Anthropic models carry Anthropic Messages events in base64 ``chunk``s.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from ..decode import EventStreamMessage, SSEEvent
from ..record import cap_message
from .anthropic_messages import AnthropicMessages
from .base import Adapter, ErrorInfo, Route, Usage, as_int, as_opt_int, as_str, d, normalize_finish


def bedrock_usage(u: dict[str, Any]) -> Usage:
    """Bedrock's inputTokens exclude cache reads/writes (like Anthropic's): totals are made inclusive."""
    cr, cw = as_int(u.get("cacheReadInputTokens")), as_int(u.get("cacheWriteInputTokens"))
    return Usage(
        input=as_int(u.get("inputTokens")) + cr + cw,
        output=as_int(u.get("outputTokens")),
        cache_read=cr,
        cache_write=cw,
    )


def exception_error(msg: EventStreamMessage) -> ErrorInfo:
    try:
        body = json.loads(msg.payload or b"{}")
    except ValueError:
        body = {}
    message = as_str(body.get("message") or body.get("Message") or body.get("originalMessage"))
    return ErrorInfo(code=msg.event_type, type=msg.event_type, message=cap_message(message))


class BedrockConverse(Adapter):
    api = "bedrock.converse"
    operation = "chat"
    routes = (Route(r"/model/(?P<model>[^/]+)/(converse|converse-stream)$"),)
    default_provider = "aws.bedrock"

    def on_request(self, body: Any) -> None:
        super().on_request(body)
        self.req.max_output_tokens = as_opt_int(d(body, "inferenceConfig").get("maxTokens"))

    def on_target(self, path: str) -> None:
        self.req.stream = path.split("?", 1)[0].rstrip("/").endswith("/converse-stream")

    def on_frame(self, msg: EventStreamMessage, t: float) -> None:
        if msg.message_type in ("exception", "error"):
            self.mid_stream_error(exception_error(msg))
            return
        try:
            obj = json.loads(msg.payload or b"{}")
        except ValueError:
            return
        et = msg.event_type
        if et == "contentBlockDelta":
            delta = d(obj, "delta")
            text = delta.get("text") or d(delta, "reasoningContent").get("text")
            if isinstance(text, str) and text:
                self.obs.text(text)
                self.content(t)
            elif "toolUse" in delta:
                self.obs.text(as_str(d(delta, "toolUse").get("input")))
                self.content(t)
        elif et == "contentBlockStart":
            start = d(obj, "start")
            if "toolUse" in start:
                self.obs.tool_call_keys.add(
                    as_str(d(start, "toolUse").get("toolUseId")) or obj.get("contentBlockIndex")
                )
                self.content(t)
        elif et == "messageStop":
            reason = as_str(obj.get("stopReason"))
            self.obs.finish_raw, self.obs.finish = reason, normalize_finish(reason)
        elif et == "metadata":
            if isinstance(obj.get("usage"), dict):
                self.obs.usage = bedrock_usage(obj["usage"])
            latency = d(obj, "metrics").get("latencyMs")
            if isinstance(latency, (int, float)):
                self.obs.provider_processing_ms = float(latency)
            self.obs.terminal = True

    def on_json(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict):
            return
        self.obs.terminal = True
        for block in d(d(obj, "output"), "message").get("content") or []:
            if isinstance(block, dict):
                self.obs.text(as_str(block.get("text")))
                if "toolUse" in block:
                    self.obs.tool_call_keys.add(as_str(d(block, "toolUse").get("toolUseId")))
        reason = as_str(obj.get("stopReason"))
        self.obs.finish_raw, self.obs.finish = reason, normalize_finish(reason)
        if isinstance(obj.get("usage"), dict):
            self.obs.usage = bedrock_usage(obj["usage"])
        latency = d(obj, "metrics").get("latencyMs")
        if isinstance(latency, (int, float)):
            self.obs.provider_processing_ms = float(latency)


class BedrockInvoke(AnthropicMessages):
    """InvokeModel(WithResponseStream) with Anthropic models: the body is Anthropic's own format."""

    api = "bedrock.invoke"
    routes = (Route(r"/model/(?P<model>[^/]+)/(invoke|invoke-with-response-stream)$"),)
    default_provider = "aws.bedrock"

    def on_target(self, path: str) -> None:
        self.req.stream = path.split("?", 1)[0].rstrip("/").endswith("/invoke-with-response-stream")

    def on_frame(self, msg: EventStreamMessage, t: float) -> None:
        if msg.message_type in ("exception", "error"):
            self.mid_stream_error(exception_error(msg))
            return
        if msg.event_type != "chunk":
            return
        try:
            inner = json.loads(base64.b64decode(json.loads(msg.payload)["bytes"]))
        except (ValueError, KeyError, TypeError):
            return
        if not isinstance(inner, dict):
            return
        self.on_event(SSEEvent(as_str(inner.get("type")) or "message", json.dumps(inner)), t)
        metrics = inner.get("amazon-bedrock-invocationMetrics")
        if isinstance(metrics, dict) and self.obs.usage is None:
            self.obs.usage = Usage(
                input=as_int(metrics.get("inputTokenCount")), output=as_int(metrics.get("outputTokenCount"))
            )
