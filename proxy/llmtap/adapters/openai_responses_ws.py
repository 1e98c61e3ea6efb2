"""OpenAI Responses API, WebSocket mode (``wss://api.openai.com/v1/responses``; Azure, xAI and
ChatGPT-plan Codex on ``chatgpt.com/backend-api/codex/responses`` speak it too).

The client sends ``response.create`` messages (the create parameters at the top level, as the
HTTP body would carry them); the server answers each with the same events the SSE form
streams (``response.created`` … ``response.completed|failed|incomplete`` or ``error``), one
JSON text message per event. One call per ``response.create``. Responses on one socket run
one after another, or side by side on lanes named by ``stream_id`` (echoed on every server
event of that response). Each call's events go to an :class:`OpenAIResponses` adapter, the
same one that parses the SSE form.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from ..decode import SSEEvent
from .base import Route, as_str
from .openai_chat import AZURE_DEPLOYMENT
from .openai_responses import OpenAIResponses
from .websocket import MAX_OPEN_CALLS, Turn, WSAdapter


class OpenAIResponsesWS(WSAdapter):
    api = "openai.responses"
    operation = "chat"
    routes = (
        Route(AZURE_DEPLOYMENT + r"/responses$", provider="azure.ai.openai", method="GET"),
        Route(r"/responses$", method="GET"),
    )
    call_adapter = OpenAIResponses

    def __init__(self, model: str = "") -> None:
        super().__init__(model)
        self._lanes: dict[str, deque[Turn]] = {}

    def on_client(self, obj: Any, raw: bytes, t: float) -> None:
        if not isinstance(obj, dict) or obj.get("type") != "response.create":
            return  # response.steer and the like continue a response: not a new call
        body = obj.get("response") if isinstance(obj.get("response"), dict) else obj
        call = OpenAIResponses()
        call.on_request(body)
        call.req.stream = True  # every answer on a socket is streamed
        if not call.req.model:
            call.req.model = self.model
        lane = self._lanes.setdefault(as_str(obj.get("stream_id")), deque())
        lane.append(Turn(call, raw, obj, t))
        if len(lane) > MAX_OPEN_CALLS:  # a server that never answers: bounded, the oldest given up
            self.finished(lane.popleft(), t)

    def on_server(self, obj: Any, text: str, size: int, t: float) -> None:
        if not isinstance(obj, dict):
            return
        lane = self._lanes.get(as_str(obj.get("stream_id")))
        if not lane:
            return  # nothing asked on this lane (an error about a malformed message, ...)
        turn = lane[0]
        turn.server(size, t)
        call = turn.adapter
        etype = as_str(obj.get("type"))
        if etype == "error" and isinstance(obj.get("status"), int) and "status_code" not in obj:
            text = json.dumps({**obj, "status_code": obj["status"]})  # the SSE form states it as status_code
        call.on_event(SSEEvent(etype, text), t)
        if call.obs.terminal:
            lane.popleft()
            self.finished(turn, t)

    def close(self) -> list[Turn]:
        open_turns = [turn for lane in self._lanes.values() for turn in lane]
        self._lanes.clear()
        return open_turns
