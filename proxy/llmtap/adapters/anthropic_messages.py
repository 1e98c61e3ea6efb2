"""Anthropic Messages (api.anthropic.com, and the same events on Vertex/Bedrock)."""

from __future__ import annotations

from typing import Any, ClassVar

from ..decode import SSEEvent
from ..providers import ProviderName
from ..record import Api, Operation, ServerTool
from .base import Adapter, ErrorInfo, Route, Usage, as_int, as_opt_int, as_str, d, error_from_body
from .deltas import DeltaTemplate

_CONTENT_DELTAS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}
_TOOL_BLOCKS = frozenset({"tool_use"})  # the client runs these: tool_calls
# Blocks of tools Anthropic ran itself (server_tool_calls), by the tool's name; usage.server_tool_use wins.
_SERVER_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})
_SERVER_NAMES: dict[str, ServerTool] = {
    "web_search": "web_search",
    "web_fetch": "web_fetch",
    "code_execution": "code_execution",
    "bash_code_execution": "code_execution",
    "text_editor_code_execution": "code_execution",
}


def server_tool_kind(name: str) -> str:
    """A ``usage.server_tool_use`` counter (``web_search_requests``) → its kind (``web_search``)."""
    return name.removesuffix("_requests")


class AnthropicMessages(Adapter):
    api: ClassVar[Api] = "anthropic.messages"
    operation: ClassVar[Operation] = "chat"
    routes: ClassVar[tuple[Route, ...]] = (
        # Claude on Vertex AI: publishers/anthropic/models/{model}:streamRawPredict
        Route(
            r"/publishers/anthropic/models/(?P<model>[^/:]+):(stream)?rawpredict$",
            providers=frozenset({"gcp.vertex_ai", None}),
            provider="gcp.vertex_ai",
        ),
        # /v1/messages on Anthropic, Bedrock's Anthropic-compatible endpoint, or any host whose
        # request speaks Anthropic (its version header or key header).
        Route(
            r"/messages$",
            providers=frozenset({"anthropic", "aws.bedrock", None}),
            or_headers=("anthropic-version", "x-api-key"),
        ),
    )
    default_provider: ClassVar[ProviderName] = "anthropic"

    def __init__(self) -> None:
        super().__init__()
        self._raw: dict[str, int] = {}  # Anthropic's own (exclusive) counters, last value wins
        self._deltas: dict[str, DeltaTemplate] = {}  # per delta type, the bytes of one seen (.deltas)
        self._reported_tools = False  # usage.server_tool_use seen: its counts replace the blocks'

    def on_target(self, path: str) -> None:
        if ":streamrawpredict" in path.split("?", 1)[0].lower():  # Claude on Vertex AI
            self.req.stream = True

    def on_request(self, body: Any) -> None:
        super().on_request(body)
        if isinstance(body, dict):
            self.req.max_output_tokens = as_opt_int(body.get("max_tokens"))
            self.req.user = as_str(d(body, "metadata").get("user_id"))

    def _usage(self, u: dict[str, Any], final: bool = False) -> None:
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ):
            if isinstance(u.get(key), int):
                self._raw[key] = as_int(u[key])
        thinking = d(u, "output_tokens_details").get("thinking_tokens")
        if isinstance(thinking, int):
            self._raw["thinking"] = as_int(thinking)
        one_hour = d(u, "cache_creation").get("ephemeral_1h_input_tokens")
        if isinstance(one_hour, int):
            self._raw["cache_1h"] = as_int(one_hour)
        stu = u.get("server_tool_use")
        if isinstance(stu, dict):
            self._reported_tools = True
            self.obs.server_tools = {server_tool_kind(k): as_int(v) for k, v in stu.items() if as_int(v) > 0}
        if isinstance(u.get("service_tier"), str) and u["service_tier"]:
            self.obs.service_tier = u["service_tier"]
        r = self._raw
        cw, cr = r.get("cache_creation_input_tokens", 0), r.get("cache_read_input_tokens", 0)
        self.set_usage(
            Usage(
                input=r.get("input_tokens", 0) + cw + cr,
                output=r.get("output_tokens", 0),
                cache_read=cr,
                cache_write=cw,
                reasoning=r.get("thinking", 0),
                cache_write_1h=min(r.get("cache_1h", 0), cw),
            ),
            final,
        )

    def _message(self, msg: dict[str, Any]) -> None:
        if isinstance(msg.get("model"), str) and msg["model"]:
            self.obs.response_model = msg["model"]
        if isinstance(msg.get("id"), str) and msg["id"]:
            self.obs.response_id = msg["id"]
        usage = msg.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)

    def on_event(self, ev: SSEEvent, t: float) -> None:
        etype = ev.event
        if etype == "ping":
            return
        if etype == "content_block_delta":  # a delta whose bytes are one seen before but for its text (.deltas)
            for tpl in self._deltas.values():
                text = tpl.match(ev.data)
                if text is not None:
                    if text:
                        self.obs.text(text)
                        self.content(t)
                    return
        obj = self.parse(ev.data)
        if not isinstance(obj, dict):
            return
        if etype == "message" or not etype:
            etype = as_str(obj.get("type"))
        if etype == "content_block_delta":
            delta = d(obj, "delta")
            dtype = as_str(delta.get("type"))
            key = _CONTENT_DELTAS.get(dtype)
            if key is not None:
                text = delta.get(key)
                if isinstance(text, str) and text:  # an empty delta carries nothing
                    self.obs.text(text)
                    self.content(t)
                if isinstance(text, str) and ev.event == "content_block_delta" and dtype not in self._deltas:
                    learned = DeltaTemplate.learn(ev.data, key)
                    if learned is not None:
                        self._deltas[dtype] = learned
        elif etype == "content_block_start":
            block = d(obj, "content_block")
            btype = block.get("type")
            if btype in _TOOL_BLOCKS or btype in _SERVER_BLOCKS:
                self._block(block, obj.get("index"))
                self.obs.text(as_str(block.get("name")))
                self.content(t)
            elif btype == "text" and block.get("text"):
                self.obs.text(as_str(block.get("text")))
                self.content(t)
        elif etype == "message_start":
            self._message(d(obj, "message"))
        elif etype == "message_delta":
            delta = d(obj, "delta")
            if delta.get("stop_reason"):
                self.set_finish(delta["stop_reason"])
            usage = obj.get("usage")
            if isinstance(usage, dict):
                self._usage(usage, final=True)  # message_delta's usage is the closing, cumulative one
        elif etype == "message_stop":
            self.obs.terminal = True
        elif etype == "error":
            self.mid_stream_error(error_from_body(obj) or ErrorInfo(message="unknown error"))

    def _block(self, block: dict[str, Any], index: Any) -> None:
        btype = block.get("type")
        if btype in _TOOL_BLOCKS:
            self.obs.tool_call_keys.add(block.get("id") or index)
        elif btype in _SERVER_BLOCKS and not self._reported_tools:
            kind = "mcp" if btype == "mcp_tool_use" else _SERVER_NAMES.get(as_str(block.get("name")), "")
            if kind:
                self.obs.server_tools[kind] = self.obs.server_tools.get(kind, 0) + 1

    def on_json(self, obj: Any, t: float) -> None:
        if not isinstance(obj, dict):
            return
        if self.error_in_body(obj):
            return
        self.obs.terminal = True
        self._message(obj)
        for block in obj.get("content") or []:
            if not isinstance(block, dict):
                continue
            self._block(block, None)
            self.obs.text(as_str(block.get("text") or block.get("thinking")))
        if obj.get("stop_reason"):
            self.set_finish(obj["stop_reason"])
