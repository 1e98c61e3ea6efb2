"""The addon's WebSocket hooks on mitmproxy's own flow objects: routing an upgrade, one
capture per call, the service from the proxy URL's user, and messages not kept by mitmproxy."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from mitmproxy import http
from mitmproxy.test import tflow
from mitmproxy.websocket import WebSocketMessage
from wsproto.frame_protocol import Opcode

from llmtap import handoff
from llmtap.capture import Capture, End
from llmtap.capture.build import build
from llmtap.capture.recorder import Recorder
from llmtap.intercept.addon import AddonConfig, LlmTapAddon
from llmtap.intercept.attribution import Fingerprinter


class Pipe:
    """The recorder the addon's messages go to, in-process: what it would hand the pipeline."""

    def __init__(self, tmp_path: Path) -> None:
        self.got: list[tuple[Capture, End]] = []
        self.recorder = Recorder(self.submit, Fingerprinter.from_data_dir(tmp_path), "default-svc")

    def submit(self, cap: Capture, end: End) -> None:
        self.got.append((cap, end))
        build(cap, end, None)  # as the pipeline does: what the capture's body buffered is given back

    def put(self, msg: handoff.Message) -> None:
        self.recorder.handle(0, [msg])


def addon(tmp_path: Path) -> tuple[LlmTapAddon, Pipe]:
    pipe = Pipe(tmp_path)
    return LlmTapAddon(AddonConfig(), pipe.put), pipe


def realtime_flow(proxy_user: str = "") -> http.HTTPFlow:
    f = tflow.twebsocketflow(messages=False)
    f.request.host, f.request.port, f.request.scheme = "api.openai.com", 443, "https"
    f.request.path = "/v1/realtime?model=gpt-realtime"
    f.request.headers["x-llmtap-session"] = "sess-ws"
    f.request.headers["user-agent"] = "OpenAI/Python 3.57.0"
    if proxy_user:
        f.request.headers["proxy-authorization"] = "Basic " + base64.b64encode(f"{proxy_user}:x".encode()).decode()
    return f


def push(a: LlmTapAddon, f: http.HTTPFlow, from_client: bool, obj: Any) -> None:
    assert f.websocket is not None
    f.websocket.messages.append(WebSocketMessage(Opcode.TEXT, from_client, json.dumps(obj).encode()))
    a.websocket_message(f)


def test_one_capture_per_realtime_response_and_no_message_kept(tmp_path: Path) -> None:
    a, pipe = addon(tmp_path)
    f = realtime_flow(proxy_user="voice-bot")
    a.requestheaders(f)
    a.request(f)
    assert "x-llmtap-session" not in f.request.headers and "proxy-authorization" not in f.request.headers
    a.responseheaders(f)  # 101: the handshake is not a call
    assert a.inflight == 0
    a.websocket_start(f)
    assert a.ws.open == 1
    push(a, f, False, {"type": "session.created", "session": {"model": "gpt-realtime"}})
    for i in range(3):
        push(a, f, True, {"type": "response.create"})
        push(a, f, False, {"type": "response.created", "response": {"id": f"r{i}"}})
        push(a, f, False, {"type": "response.output_text.delta", "response_id": f"r{i}", "delta": "hi"})
        push(a, f, False, {"type": "response.done", "response": {"id": f"r{i}", "status": "completed"}})
        assert f.websocket is not None and f.websocket.messages == []  # observed, then dropped
    push(a, f, True, {"type": "response.create"})
    a.websocket_end(f)
    assert a.ws.open == 0 and len(pipe.got) == 4
    facts = [cap.facts for cap, _ in pipe.got]
    assert {x.transport for x in facts} == {"websocket"} and {x.api for x in facts} == {"openai.realtime"}
    assert {x.service for x in facts} == {"voice-bot"} and {x.attribution["session_id"] for x in facts} == {"sess-ws"}
    assert len({x.connection_id for x in facts}) == 1 and facts[0].connection_id == f.client_conn.id
    assert [e.kind for _, e in pipe.got][-1] in ("client_disconnected", "upstream_error")


def test_sockets_that_are_not_llm_apis_are_relayed_and_still_not_kept(tmp_path: Path) -> None:
    a, pipe = addon(tmp_path)
    f = tflow.twebsocketflow(messages=False)
    f.request.host, f.request.port = "chatgpt.com", 443
    f.request.path = "/backend-api/conversation/ws"
    answer, f.response = f.response, None  # at requestheaders no answer exists yet (tflow makes one)
    a.requestheaders(f)
    f.response = answer
    assert f.request.stream  # not the API: passed through, never buffered
    a.request(f)
    a.responseheaders(f)
    a.websocket_start(f)
    push(a, f, False, {"type": "anything"})
    assert f.websocket is not None and f.websocket.messages == [] and a.ws.open == 0 and pipe.got == []


def test_a_refused_upgrade_is_a_call(tmp_path: Path) -> None:
    a, pipe = addon(tmp_path)
    f = realtime_flow()
    a.requestheaders(f)
    a.request(f)
    assert f.response is not None
    f.response.status_code = 401
    f.response.headers["content-type"] = "application/json"
    a.responseheaders(f)
    assert f.response.stream is not True and a.inflight == 1
    assert callable(f.response.stream)
    f.response.stream(json.dumps({"error": {"code": "invalid_api_key", "message": "no"}}).encode())
    a.response(f)
    ((cap, _),) = pipe.got
    assert (cap.status, cap.facts.transport, cap.facts.api, cap.adapter.req.model) == (
        401,
        "websocket",
        "openai.realtime",
        "gpt-realtime",
    )


def test_the_connect_names_the_service_of_every_call_on_the_connection(tmp_path: Path) -> None:
    a, pipe = addon(tmp_path)
    connect = tflow.tflow()
    connect.request.method = "CONNECT"
    connect.request.headers["proxy-authorization"] = "Basic " + base64.b64encode(b"batch-jobs:x").decode()
    a.http_connect(connect)
    inner = tflow.tflow()
    inner.client_conn = connect.client_conn
    inner.request.host, inner.request.port, inner.request.scheme = "api.openai.com", 443, "https"
    inner.request.method, inner.request.path = "POST", "/v1/chat/completions"
    inner.request.content = b'{"model": "gpt-4o", "messages": []}'
    a.requestheaders(inner)
    a.request(inner)
    a.response(inner)
    assert pipe.got[-1][0].facts.service == "batch-jobs"
    other = tflow.tflow()  # another client connection: the sidecar's --service
    other.request.host, other.request.port, other.request.scheme = "api.openai.com", 443, "https"
    other.request.method, other.request.path = "POST", "/v1/chat/completions"
    a.requestheaders(other)
    a.request(other)
    a.response(other)
    assert pipe.got[-1][0].facts.service == "default-svc"
