"""The WebSocket half of the addon: an intercepted socket's messages and close → :mod:`llmtap.handoff`.

The bytes of a WebSocket are relayed as they arrive by :mod:`.wsrelay` (which replaces
mitmproxy's layer); it reads a copy of each direction and calls ``websocket_message`` for every
whole message within its bound (an :class:`~.wsrelay.UnparsedMessage` for one it passed on
unparsed). The hooks here only copy the message's payload reference out of the flow, stamped
with its arrival time, and return: nothing is parsed, awaited or buffered here, and no byte
waits on them; the recorder assigns messages to calls (:mod:`llmtap.capture.ws`).

mitmproxy also appends every message to ``flow.websocket.messages`` and keeps them for the
socket's lifetime (there is no option to turn that off in mitmproxy 12): a Realtime socket
streaming audio for hours would grow without bound. Every message is dropped from that list
once observed, on every WebSocket the proxy decrypts, captured or not.

Thread contract: every method runs on the proxy's event loop.
"""

from __future__ import annotations

import time
from typing import Any

from mitmproxy import http

from .. import handoff
from .calls import KEY, CallState, Put
from .wsrelay import RelayedMessage, UnparsedMessage


def is_upgrade(flow: http.HTTPFlow) -> bool:
    req = flow.request
    return req.method == "GET" and req.headers.get("upgrade", "").lower() == "websocket"


class WebSockets:
    """The captured sockets of one proxy. ``open`` counts them."""

    def __init__(self, put: Put) -> None:
        self._put = put
        self.open = 0

    @staticmethod
    def _state(flow: http.HTTPFlow) -> CallState | None:
        state: CallState | None = flow.metadata.get(KEY)
        return state if state is not None and state.websocket and state.sent else None

    def start(self, flow: http.HTTPFlow) -> None:
        state = self._state(flow)
        if state is None or flow.response is None:
            return
        headers = [(k.lower(), v) for k, v in flow.response.headers.items(multi=True)]
        self._put(handoff.SocketOpen(state.call, headers, time.monotonic()))
        state.socket_open = True
        self.open += 1

    def message(self, flow: http.HTTPFlow) -> None:
        ws = flow.websocket
        if ws is None:
            return
        state = self._state(flow)
        if state is not None and ws.messages:
            m = ws.messages[-1]
            at = m.arrived if isinstance(m, RelayedMessage) else time.monotonic()  # the relay's own mark
            if isinstance(m, UnparsedMessage):
                self._put(handoff.SocketUnparsed(state.call, m.from_client, at, m.why, m.stop))
            else:
                self._put(handoff.SocketMessage(state.call, m.from_client, at, m.content))
        ws.messages.clear()  # observed: mitmproxy would keep every message for the socket's lifetime

    def end(self, flow: http.HTTPFlow, reason: str = "") -> None:
        state = self._state(flow)
        if state is None:
            return
        del flow.metadata[KEY]
        if state.socket_open:
            self.open -= 1
        ws: Any = flow.websocket
        by_client = ws.closed_by_client if ws is not None else None
        why = reason or (f"code {ws.close_code}" if ws is not None and ws.close_code else "")
        self._put(handoff.SocketClose(state.call, by_client, time.monotonic(), why))
