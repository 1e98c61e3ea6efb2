"""OpenAI Realtime API (``wss://api.openai.com/v1/realtime?model=…``; Azure's ``/openai/realtime``).

One call per server ``response.done``. The request model is the URL's (``model=``, Azure's
``deployment=``); the response model the one the session reports (``session.created``). A
call starts when the sidecar received the client ``response.create`` that asked for it or,
for a server-VAD turn (no ``response.create``), the ``input_audio_buffer.committed`` event. Events name their response
(``response_id``), so out-of-band responses running side by side are told apart. Usage comes
from ``response.usage``: input and output counts include text, audio and image tokens; cached
input tokens from ``input_token_details.cached_tokens``. Both the GA event names
(``response.output_text.delta``, ``response.output_audio.delta``) and the beta ones
(``response.text.delta``, ``response.audio.delta``) are read.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ..record import cap_message
from .base import Adapter, ErrorInfo, Route, Usage, as_int, as_opt_int, as_str, d, error_from_body
from .websocket import MAX_OPEN_CALLS, Turn, WSAdapter

# Content-bearing events (TTFT, gaps): generated text, audio, transcripts, tool-call arguments.
_TEXT_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.text.delta",
        "response.output_audio_transcript.delta",
        "response.audio_transcript.delta",
        "response.function_call_arguments.delta",
    }
)
_AUDIO_DELTAS = frozenset({"response.output_audio.delta", "response.audio.delta"})
_TOOL_ITEMS = frozenset({"function_call"})  # the client runs it; a remote MCP call the server runs itself


def parse_realtime_usage(u: dict[str, Any]) -> Usage:
    itd, otd = d(u, "input_token_details"), d(u, "output_token_details")
    modal_in = sum(as_int(itd.get(k)) for k in ("text_tokens", "audio_tokens", "image_tokens"))
    modal_out = sum(as_int(otd.get(k)) for k in ("text_tokens", "audio_tokens"))
    return Usage(
        input=as_int(u.get("input_tokens")) or modal_in,
        output=as_int(u.get("output_tokens")) or modal_out,
        cache_read=as_int(itd.get("cached_tokens")),
        input_audio=as_int(itd.get("audio_tokens")),
        input_image=as_int(itd.get("image_tokens")),
        output_audio=as_int(otd.get("audio_tokens")),
        output_image=as_int(otd.get("image_tokens")),
        cache_read_audio=as_int(d(itd, "cached_tokens_details").get("audio_tokens")),
    )


class RealtimeResponse(Adapter):
    """One Realtime response: the per-call adapter :class:`OpenAIRealtime` feeds."""

    api = "openai.realtime"
    operation = "chat"

    def on_request(self, body: Any) -> None:
        """``body``: the client's ``response.create`` message (``None`` for a VAD turn)."""
        self.req.stream = True
        resp = d(body, "response")
        cap = resp.get("max_output_tokens", resp.get("max_response_output_tokens"))
        self.req.max_output_tokens = as_opt_int(cap)  # "inf" → None

    def on_json(self, obj: Any, t: float) -> None:
        """A failed upgrade's error body (the socket never opened)."""
        self.error_in_body(obj)

    def on_realtime(self, etype: str, obj: dict[str, Any], t: float) -> None:
        if etype in _TEXT_DELTAS:
            delta = obj.get("delta")
            if isinstance(delta, str) and delta:
                self.obs.text(delta)
                self.content(t)
        elif etype in _AUDIO_DELTAS:
            if obj.get("delta"):
                self.content(t)
        elif etype == "response.output_item.added":
            item = d(obj, "item")
            if item.get("type") in _TOOL_ITEMS:
                self.obs.tool_call_keys.add(item.get("id") or len(self.obs.tool_call_keys))
            elif item.get("type") == "mcp_call":
                self.obs.server_tools["mcp"] = self.obs.server_tools.get("mcp", 0) + 1
        elif etype == "response.done":
            self.done(d(obj, "response"))

    def done(self, resp: dict[str, Any]) -> None:
        if isinstance(resp.get("id"), str):
            self.obs.response_id = resp["id"]
        usage = resp.get("usage")
        if isinstance(usage, dict):  # the closing report, also for a cancelled or failed response
            self.set_usage(parse_realtime_usage(usage), final=True)
        status = as_str(resp.get("status"))
        details = d(resp, "status_details")
        if status == "failed":
            err = d(details, "error")
            self.set_finish("failed")
            self.mid_stream_error(
                ErrorInfo(
                    code=as_str(err.get("code")),
                    type=as_str(err.get("type")),
                    message=cap_message(as_str(err.get("message")) or as_str(details.get("reason"))),
                )
            )
        elif status == "cancelled":
            # The client (response.cancel) or its user (a VAD barge-in) cut it: not terminal, so
            # the capture records it as cancelled.
            self.obs.finish_raw = as_str(details.get("reason")) or status
            self.obs.finish = "cancelled"
        elif status == "incomplete":
            self.obs.terminal = True
            self.set_finish(as_str(details.get("reason")) or status)
        else:
            self.obs.terminal = True
            self.obs.finish_raw = status or "completed"
            self.obs.finish = "tool_calls" if self.obs.tool_call_keys else "stop"


class OpenAIRealtime(WSAdapter):
    api = "openai.realtime"
    operation = "chat"
    routes = (Route(r"/realtime$", method="GET"),)
    call_adapter = RealtimeResponse

    def __init__(self, model: str = "") -> None:
        super().__init__(model)
        self.session_model = ""  # the model the session reports (session.created / .updated)
        self._asked: deque[Turn] = deque()  # response.create sent, no response.created yet
        self._committed: float | None = None  # the last input_audio_buffer.committed
        self._open: dict[str, Turn] = {}  # by response id

    def _new(self, raw: bytes, obj: Any, t: float) -> Turn:
        call = RealtimeResponse()
        call.on_request(obj)
        call.req.model = self.model
        return Turn(call, raw, obj, t)

    def on_client(self, obj: Any, raw: bytes, t: float) -> None:
        if isinstance(obj, dict) and obj.get("type") == "response.create":
            self._asked.append(self._new(raw, obj, t))
            if len(self._asked) > MAX_OPEN_CALLS:  # never answered: bounded, the oldest given up
                self.finished(self._asked.popleft(), t)

    def on_server(self, obj: Any, text: str, size: int, t: float) -> None:
        if not isinstance(obj, dict):
            return
        etype = as_str(obj.get("type"))
        if etype in ("session.created", "session.updated"):
            model = as_str(d(obj, "session").get("model"))
            if model:
                self.session_model = model
        elif etype == "input_audio_buffer.committed":
            self._committed = t
        elif etype == "response.created":
            self._created(d(obj, "response"), size, t)
        elif etype == "error":
            self._error(obj, size, t)
        else:
            rid = as_str(obj.get("response_id")) or (
                as_str(d(obj, "response").get("id")) if etype == "response.done" else ""
            )
            turn = self._open.get(rid)
            if turn is None:
                return
            turn.server(size, t)
            call = turn.adapter
            assert isinstance(call, RealtimeResponse)
            call.on_realtime(etype, obj, t)
            if etype == "response.done":
                del self._open[rid]
                self.finished(turn, t)

    def _created(self, resp: dict[str, Any], size: int, t: float) -> None:
        if self._asked:
            turn = self._asked.popleft()
        else:  # a server-VAD turn: it started when the audio buffer was committed
            turn = self._new(b"", None, self._committed if self._committed is not None else t)
        self._committed = None
        turn.server(size, t)
        turn.adapter.obs.response_model = self.session_model
        if isinstance(resp.get("id"), str):
            turn.adapter.obs.response_id = resp["id"]
        self._open[as_str(resp.get("id"))] = turn
        if len(self._open) > MAX_OPEN_CALLS:  # responses the server never finished: the oldest given up
            oldest = next(iter(self._open))
            self.finished(self._open.pop(oldest), turn.start)

    def _error(self, obj: dict[str, Any], size: int, t: float) -> None:
        """An ``error`` answers a client event; it fails a call when that event asked for one."""
        event_id = as_str(d(obj, "error").get("event_id"))
        for turn in self._asked:
            asked_id = as_str(turn.request.get("event_id")) if isinstance(turn.request, dict) else ""
            if (event_id and asked_id == event_id) or (not event_id and not asked_id):
                self._asked.remove(turn)
                turn.server(size, t)
                turn.adapter.mid_stream_error(error_from_body(obj) or ErrorInfo(message="unknown error"))
                self.finished(turn, t)
                return

    def close(self) -> list[Turn]:
        open_turns = [*self._asked, *self._open.values()]
        self._asked.clear()
        self._open.clear()
        return open_turns
