"""The WebSocket relay that replaces mitmproxy's layer: every byte sent on as it came, messages read on the side."""

from __future__ import annotations

import inspect
from typing import Any

from mitmproxy import http
from mitmproxy.options import Options
from mitmproxy.proxy import commands, events
from mitmproxy.proxy.commands import StartHook
from mitmproxy.proxy.context import Context
from mitmproxy.proxy.layers import websocket as mitm_ws
from mitmproxy.proxy.layers.http import HttpStream
from mitmproxy.test import tflow
from mitmproxy.websocket import WebSocketMessage

from llmtap.intercept import wsrelay
from llmtap.intercept.wsrelay import LOOP_STEP, RelayLayer, UnparsedMessage, WebSocketLimits, negotiated
from llmtap.testing.rawws import MIB, FrameWriter, deflate_bomb


def test_mitmproxy_still_looks_its_websocket_layer_up_when_an_upgrade_completes() -> None:
    """RelayLayer takes the place of ``mitmproxy.proxy.layers.websocket.WebsocketLayer``, which mitmproxy's HTTP
    layer reads when a 101 completes. A mitmproxy release that binds it otherwise must fail here."""
    assert "websocket.WebsocketLayer(self.context, self.flow)" in inspect.getsource(HttpStream.flow_done)
    addon = WebSocketLimits()

    class Loader:
        def add_option(self, *a: Any) -> None:
            pass

    addon.load(Loader())
    try:
        assert mitm_ws.WebsocketLayer is RelayLayer
    finally:
        addon.done()
    assert mitm_ws.WebsocketLayer is not RelayLayer


def test_the_negotiated_extension_is_read_as_mitmproxy_reads_it() -> None:
    assert negotiated("") == (False, False, False)
    assert negotiated("permessage-deflate") == (True, False, False)
    assert negotiated("x-other, permessage-deflate; client_no_context_takeover; server_max_window_bits=10") == (
        True,
        True,
        False,
    )


class Run:
    """A RelayLayer driven by hand: every command it yields, each hook answered at once."""

    def __init__(self, extensions: str = "permessage-deflate", **options: int) -> None:
        self.flow = tflow.twebsocketflow(messages=False)
        assert self.flow.response is not None and self.flow.websocket is not None
        self.flow.websocket.messages = []
        if extensions:
            self.flow.response.headers["Sec-WebSocket-Extensions"] = extensions
        opts = Options()
        for name, value in options.items():
            opts.add_option(name, int, value, "")
        self.ctx = Context(self.flow.client_conn, opts)
        self.ctx.server = self.flow.server_conn
        self.layer = RelayLayer(self.ctx, self.flow)
        self.sent: dict[bool, bytes] = {True: b"", False: b""}  # by destination: to the client?
        self.messages: list[WebSocketMessage] = []
        self.hooks: list[str] = []
        self.wakeups: list[commands.RequestWakeup] = []
        self.closed: list[object] = []
        self.drive(events.Start())

    def drive(self, event: events.Event) -> None:
        todo = [event]
        while todo:
            for cmd in self.layer.handle_event(todo.pop(0)):
                if isinstance(cmd, commands.SendData):
                    self.sent[cmd.connection == self.ctx.client] += cmd.data
                elif isinstance(cmd, commands.RequestWakeup):
                    self.wakeups.append(cmd)
                elif isinstance(cmd, commands.CloseConnection):
                    self.closed.append(cmd.connection)
                elif isinstance(cmd, StartHook):
                    self.hooks.append(type(cmd).__name__)
                    if isinstance(cmd, mitm_ws.WebsocketMessageHook):
                        ws: Any = self.flow.websocket
                        self.messages += ws.messages
                        ws.messages.clear()  # as the addon does
                    todo.append(events.HookCompleted(cmd))

    def data(self, from_client: bool, data: bytes, chunk: int = 65535) -> None:
        for i in range(0, len(data), chunk):
            conn = self.ctx.client if from_client else self.ctx.server
            self.drive(events.DataReceived(conn, data[i : i + chunk]))

    def wake(self) -> int:
        n = 0
        while self.wakeups:
            self.drive(events.Wakeup(self.wakeups.pop()))
            n += 1
        return n


def test_bytes_go_on_unchanged_and_messages_reach_the_hook() -> None:
    run = Run()
    client, server = FrameWriter(masked=True, deflate=True), FrameWriter(masked=False, deflate=True)
    up = client.text('{"type":"response.create"}') + client.frame(9, b"ping")
    down = server.text('{"type":"response.created"}') + server.frame(1, b"frag", fin=False) + server.frame(0, b"ment")
    run.data(True, up, chunk=5)
    run.data(False, down, chunk=3)
    assert run.sent == {False: up, True: down}  # to the server, to the client: the very bytes, masks and all
    assert [(m.from_client, m.content) for m in run.messages] == [
        (True, b'{"type":"response.create"}'),
        (False, b'{"type":"response.created"}'),
        (False, b"fragment"),
    ]
    assert wsrelay.HELD.used == 0  # nothing held between messages
    # the close handshake: the end hook at the first close frame, both connections closed after the second
    bye, bye_too = client.close(1000), server.close(1000)
    run.data(True, bye)
    assert run.hooks[-1] == "WebsocketEndHook" and not run.closed
    ws: Any = run.flow.websocket
    assert (ws.closed_by_client, ws.close_code) == (True, 1000)
    run.data(False, bye_too)
    assert run.closed == [run.ctx.client, run.ctx.server] and run.hooks.count("WebsocketEndHook") == 1
    assert run.sent == {False: up + bye, True: down + bye_too}


def test_a_bomb_is_inflated_a_step_at_a_time_then_the_socket_is_no_longer_read() -> None:
    run = Run(llmtap_ws_max_inflate=16 * MIB)
    server = FrameWriter(masked=False, deflate=True)
    bomb = server.frame(2, deflate_bomb(1024), rsv1=True)
    run.data(False, bomb)
    assert run.sent[True] == bomb  # relayed whole, at once
    steps = run.wake()
    assert steps >= (16 * MIB) // LOOP_STEP // 2  # the rest inflated on later steps, not in one
    (stop,) = run.messages
    assert isinstance(stop, UnparsedMessage) and stop.stop and "inflates past 16 MiB" in stop.why
    after = server.text("after") + server.close(1000)
    run.data(False, after)
    assert run.sent[True] == bomb + after and len(run.messages) == 1  # still relayed; close still seen
    ws: Any = run.flow.websocket
    assert (ws.closed_by_client, ws.close_code) == (False, 1000)


def test_an_oversized_message_is_said_and_the_socket_still_read() -> None:
    run = Run("", llmtap_ws_max_message=MIB)
    client = FrameWriter(masked=True, deflate=False)
    wire = b"".join(client.hostile("fragments", 3)) + client.text("next")
    run.data(True, wire)
    first, second = run.messages
    assert isinstance(first, UnparsedMessage) and not first.stop and first.size == 3 * MIB
    assert second.content == b"next" and run.sent[False] == wire


def test_a_connection_that_goes_away_ends_the_socket_once() -> None:
    run = Run()
    run.data(True, FrameWriter(masked=True, deflate=True).text("hi"))
    run.drive(events.ConnectionClosed(run.ctx.server))
    ws: Any = run.flow.websocket
    assert run.hooks.count("WebsocketEndHook") == 1 and (ws.closed_by_client, ws.close_code) == (False, 1006)
    assert run.closed == [run.ctx.client, run.ctx.server]
    run.drive(events.ConnectionClosed(run.ctx.client))  # later events go nowhere
    assert run.hooks.count("WebsocketEndHook") == 1


def test_the_flow_keeps_no_message() -> None:
    run = Run()
    w = FrameWriter(masked=True, deflate=True)
    run.data(True, b"".join(w.text(str(i)) for i in range(100)))
    assert len(run.messages) == 100
    assert isinstance(run.flow, http.HTTPFlow) and run.flow.websocket is not None
    assert run.flow.websocket.messages == []
