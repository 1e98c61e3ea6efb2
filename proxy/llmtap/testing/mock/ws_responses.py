"""Mock OpenAI Responses API, WebSocket mode: each ``response.create`` is answered with the events
the SSE form streams (built by :func:`.responses.openai_responses`), one JSON text message each,
``stream_id`` echoed when the create named a lane.

Scenarios (``metadata.mock_scenario`` of the create, or ``x-mock-scenario`` on the upgrade):
``default``; ``failed_rate_limit`` (``response.failed``); ``error`` (an ``error`` event, the
shape the WebSocket API sends: ``{"type":"error","status":400,"error":{…}}``); ``close_mid``
(the server closes the socket after two deltas); ``abort_mid`` (the TCP connection drops after
two deltas); ``slow`` (200 ms between events: for client cancels).
"""

from __future__ import annotations

import json
from typing import Any

from .responses import openai_responses
from .websocket import Session, Step


def _events(reply_chunks: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for chunk in reply_chunks:
        for line in chunk.decode().splitlines():
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
    return out


class ResponsesSession(Session):
    def on_message(self, obj: Any) -> list[Step]:
        if not isinstance(obj, dict) or obj.get("type") != "response.create":
            return []
        body: dict[str, Any] = obj["response"] if isinstance(obj.get("response"), dict) else obj
        meta: dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
        scenario = str(meta.get("mock_scenario") or self.sock.scenario or "default")
        model = str(body.get("model") or "gpt-4.1")
        if model.startswith("mock-"):
            scenario = model[5:]
        delay = self.delay_for(meta) if scenario != "slow" else 0.2
        lane = obj.get("stream_id")
        if scenario == "error":
            err = {
                "type": "error",
                "status": 400,
                "error": {
                    "type": "invalid_request_error",
                    "code": "previous_response_not_found",
                    "message": "Previous response with id 'resp_gone' not found.",
                    "param": "previous_response_id",
                },
            }
            return [Step({**err, **({"stream_id": lane} if lane else {})}, delay)]
        events = _events(openai_responses({**body, "stream": True}, scenario).chunks)
        steps = [Step({**e, **({"stream_id": lane} if lane else {})}, delay) for e in events]
        if scenario in ("close_mid", "abort_mid"):
            cut = next(i for i, e in enumerate(events) if e["type"] == "response.output_text.delta") + 2
            steps = [*steps[:cut], Step(delay=delay, close=1011 if scenario == "close_mid" else None)]
            steps[-1].abort = scenario == "abort_mid"
        return steps
