"""Mock OpenAI Realtime API (``/v1/realtime?model=…``): the GA event names, or the beta ones when the
upgrade carries ``OpenAI-Beta: realtime=v1``.

On open: ``session.created``. A ``response.create`` is answered with ``response.created``, the
output item, paced deltas (text, or audio + transcript), ``response.done`` with usage (text
and audio tokens, cached input tokens) and ``rate_limits.updated``. With server VAD on
(``session.update`` with ``turn_detection.type = server_vad``), appended audio followed by
``silence_duration_ms`` of silence commits the buffer and starts a response by itself, as the
real server does. ``response.cancel`` ends the response in flight with status ``cancelled``.

Scenarios (``response.metadata.mock_scenario``, or ``x-mock-scenario`` on the upgrade):
``default``; ``error`` (an ``error`` event naming the create's ``event_id``, no response);
``failed`` (``response.done`` with status ``failed``); ``close_mid`` / ``abort_mid`` (the server
closes, or the TCP connection drops, after two deltas); ``slow`` (200 ms between events);
``unauthorized`` on the upgrade (a 401: no socket).
"""

from __future__ import annotations

import base64
import itertools
import time
from typing import Any

from .common import words
from .websocket import Session, Socket, Step

USAGE = {  # one response: text and audio tokens on both sides, part of the input cached
    "total_tokens": 220,
    "input_tokens": 160,
    "output_tokens": 60,
    "input_token_details": {
        "text_tokens": 120,
        "audio_tokens": 40,
        "image_tokens": 0,
        "cached_tokens": 64,
        "cached_tokens_details": {"text_tokens": 64, "audio_tokens": 0, "image_tokens": 0},
    },
    "output_token_details": {"text_tokens": 12, "audio_tokens": 48},
}
AUDIO_CHUNK = base64.b64encode(bytes(480)).decode()  # 10 ms of 24 kHz pcm16 silence


class RealtimeSession(Session):
    def __init__(self, sock: Socket) -> None:
        super().__init__(sock)
        self.beta = "realtime=v1" in sock.headers.get("openai-beta", "")
        self.model = _query(sock.path, "model") or "gpt-realtime"
        self.ids = itertools.count(1)
        self.vad = False
        self.silence_s = 0.2
        self.audio_pending = False
        self.last_audio = 0.0
        self.in_flight: str | None = None
        self.cancelled: set[str] = set()

    def reject(self) -> tuple[int, dict[str, Any]] | None:
        if self.sock.scenario == "unauthorized":
            return 401, {
                "error": {
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                    "message": "Incorrect API key provided.",
                }
            }
        return None

    def _ev(self, etype: str, **fields: Any) -> dict[str, Any]:
        return {"type": etype, "event_id": f"event_mock{next(self.ids)}", **fields}

    def _name(self, ga: str) -> str:
        beta = {
            "response.output_text.delta": "response.text.delta",
            "response.output_audio.delta": "response.audio.delta",
            "response.output_audio_transcript.delta": "response.audio_transcript.delta",
        }
        return beta.get(ga, ga) if self.beta else ga

    def on_open(self) -> list[Step]:
        session = {"id": "sess_mock1", "object": "realtime.session", "model": self.model, "type": "realtime"}
        return [Step(self._ev("session.created", session=session))]

    def on_message(self, obj: Any) -> list[Step]:
        if not isinstance(obj, dict):
            return []
        etype = obj.get("type")
        if etype == "session.update":
            td = ((obj.get("session") or {}).get("audio") or {}).get("input", {}).get("turn_detection") or (
                obj.get("session") or {}
            ).get("turn_detection")
            if isinstance(td, dict):
                self.vad = td.get("type") == "server_vad"
                self.silence_s = float(td.get("silence_duration_ms", 200)) / 1000.0
            return [Step(self._ev("session.updated", session={"id": "sess_mock1", "model": self.model}))]
        if etype == "input_audio_buffer.append":
            self.audio_pending, self.last_audio = True, time.monotonic()
            return []
        if etype == "input_audio_buffer.commit":
            self.audio_pending = False
            return [Step(self._ev("input_audio_buffer.committed", item_id="item_in1", previous_item_id=None))]
        if etype == "response.cancel":
            if self.in_flight:
                self.cancelled.add(self.in_flight)
            return []
        if etype == "response.create":
            return self._respond(obj)
        return []

    def timer(self) -> tuple[float, Any] | None:
        if not (self.vad and self.audio_pending):
            return None
        left = self.silence_s - (time.monotonic() - self.last_audio)

        def fire() -> list[Step]:
            self.audio_pending = False
            steps = [
                Step(self._ev("input_audio_buffer.speech_stopped", audio_end_ms=800, item_id="item_in1")),
                Step(self._ev("input_audio_buffer.committed", item_id="item_in1", previous_item_id=None)),
            ]
            return steps + self._respond(None)

        return max(left, 0.0), fire

    def _respond(self, create: dict[str, Any] | None) -> list[Step]:
        params: dict[str, Any] = (create or {}).get("response") or {}
        meta: dict[str, Any] = params["metadata"] if isinstance(params.get("metadata"), dict) else {}
        scenario = str(meta.get("mock_scenario") or self.sock.scenario or "default")
        delay = 0.2 if scenario == "slow" else self.delay_for(meta)
        if scenario == "error":
            error = {
                "type": "invalid_request_error",
                "code": "invalid_value",
                "message": "Invalid value: 'loud'. Supported values are: 'alloy', 'ash', 'ballad'.",
                "param": "response.audio.output.voice",
                "event_id": (create or {}).get("event_id"),
            }
            return [Step(self._ev("error", error=error), delay)]
        rid = f"resp_mock_rt{next(self.ids)}"
        self.in_flight = rid
        audio = "audio" in (params.get("output_modalities") or params.get("modalities") or ["audio"])
        resp: dict[str, Any] = {
            "id": rid,
            "object": "realtime.response",
            "status": "in_progress",
            "output": [],
            "usage": None,
        }
        steps = [
            Step(self._ev("response.created", response=resp), delay),
            Step(
                self._ev(
                    "response.output_item.added",
                    response_id=rid,
                    output_index=0,
                    item={"id": "item_out1", "type": "message", "role": "assistant", "content": []},
                ),
                delay,
            ),
        ]
        kinds = (
            ["response.output_audio_transcript.delta", "response.output_audio.delta"]
            if audio
            else ["response.output_text.delta"]
        )
        for i, w in enumerate(words(6)):
            for j, kind in enumerate(kinds):
                delta = AUDIO_CHUNK if kind == "response.output_audio.delta" else w
                steps.append(
                    Step(
                        delay=0 if j else delay,
                        make=self._delta(rid, self._name(kind), delta),
                        when=lambda rid=rid: rid not in self.cancelled,  # type: ignore[misc]
                    )
                )
            if i == 1 and scenario in ("close_mid", "abort_mid"):
                steps.append(
                    Step(delay=delay, close=1011 if scenario == "close_mid" else None, abort=scenario == "abort_mid")
                )
                return steps
        steps.append(Step(delay=delay, make=lambda: self._done(rid, scenario)))
        steps.append(Step(make=self._rate_limits))
        return steps

    def _delta(self, rid: str, etype: str, delta: str) -> Any:
        def make() -> dict[str, Any]:
            return self._ev(etype, response_id=rid, item_id="item_out1", output_index=0, content_index=0, delta=delta)

        return make

    def _done(self, rid: str, scenario: str) -> dict[str, Any]:
        status: str = "completed"
        details: dict[str, Any] | None = None
        if rid in self.cancelled:
            status, details = "cancelled", {"type": "cancelled", "reason": "client_cancelled"}
        elif scenario == "failed":
            status = "failed"
            details = {
                "type": "failed",
                "error": {"type": "server_error", "code": "server_error", "message": "The server had an error."},
            }
        self.in_flight = None
        resp: dict[str, Any] = {
            "id": rid,
            "object": "realtime.response",
            "status": status,
            "status_details": details,
            "output": [],
            "usage": USAGE,
        }
        return self._ev("response.done", response=resp)

    def _rate_limits(self) -> dict[str, Any]:
        limits = [
            {"name": "requests", "limit": 5000, "remaining": 4999, "reset_seconds": 0.012},
            {"name": "tokens", "limit": 400000, "remaining": 399780, "reset_seconds": 0.033},
        ]
        return self._ev("rate_limits.updated", rate_limits=limits)


def _query(path: str, name: str) -> str:
    from urllib.parse import parse_qs, urlsplit

    return (parse_qs(urlsplit(path).query).get(name) or [""])[0]
