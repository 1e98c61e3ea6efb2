"""The WebSocket half of the addon: upgrade requests, messages, closes → :mod:`llmtap.capture.ws`.

mitmproxy relays a WebSocket message by message: it reassembles the frames of a message,
calls ``websocket_message``, and once the hook returns sends the message on, re-framed with
the original fragment sizes (the bytes of the payload unchanged). The hooks here only copy
the message's payload reference out of the flow and return: nothing is awaited, nothing
buffered, so no frame waits on llmtap beyond the one hook call mitmproxy makes anyway.

mitmproxy also appends every message to ``flow.websocket.messages`` and keeps them for the
socket's lifetime (there is no option to turn that off in mitmproxy 12): a Realtime socket
streaming audio for hours would grow without bound. Every message is dropped from that list
once observed, on every WebSocket the proxy decrypts, captured or not.

Thread contract: every method runs on the proxy's event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mitmproxy import http

from ..adapters import Adapter, WSRouteMatch, route_ws
from ..capture import Capture, RequestFacts
from ..capture.tee import ParseErrorHook
from ..capture.ws import Submit, WSConnection
from ..providers import ProviderName
from ..record import Api

_UPGRADE = "llmtap_ws_upgrade"  # (route, facts) between the upgrade request and websocket_start
_SOCKET = "llmtap_ws"

FactsFor = Callable[[http.HTTPFlow, list[tuple[str, str]], bytes, ProviderName, Api], RequestFacts]


def is_upgrade(flow: http.HTTPFlow) -> bool:
    req = flow.request
    return req.method == "GET" and req.headers.get("upgrade", "").lower() == "websocket"


class WebSockets:
    """Per-socket captures of one proxy. ``open`` counts the sockets being captured."""

    def __init__(
        self,
        facts_for: FactsFor,
        submit: Submit,
        on_parse_error: ParseErrorHook,
        make_adapter: Callable[[type[Adapter]], Adapter],
    ) -> None:
        self._facts_for = facts_for
        self._submit = submit
        self._on_parse_error = on_parse_error
        self._make_adapter = make_adapter
        self.open = 0

    def upgrade_request(self, flow: http.HTTPFlow, headers: list[tuple[str, str]]) -> Capture | None:
        """An upgrade to an intercepted host. Returns the capture of the handshake itself, which
        records a call only when the upgrade is refused (a 401, a 429: no socket, no messages)."""
        req = flow.request
        match = route_ws(req.host, req.path, frozenset(k for k, _ in headers))
        if match is None:
            return None
        facts = self._facts_for(flow, headers, b"", match.provider, match.api)
        facts = replace(facts, transport="websocket")
        flow.metadata[_UPGRADE] = (match, facts)
        call = self._make_adapter(match.adapter.call_adapter)
        call.req.model = match.model
        return Capture(facts, call, self._on_parse_error)

    def start(self, flow: http.HTTPFlow) -> None:
        pending: tuple[WSRouteMatch, RequestFacts] | None = flow.metadata.pop(_UPGRADE, None)
        if pending is None or flow.response is None:
            return
        match, facts = pending
        headers = [(k.lower(), v) for k, v in flow.response.headers.items(multi=True)]
        adapter = match.adapter(match.model)
        keep_trace = bool(flow.request.headers.get("traceparent"))
        flow.metadata[_SOCKET] = WSConnection(facts, adapter, self._submit, headers, self._on_parse_error, keep_trace)
        self.open += 1

    def message(self, flow: http.HTTPFlow) -> None:
        ws = flow.websocket
        if ws is None:
            return
        conn: WSConnection | None = flow.metadata.get(_SOCKET)
        if conn is not None and ws.messages:
            m = ws.messages[-1]
            conn.on_message(m.from_client, m.content, time.monotonic())
        ws.messages.clear()  # observed: mitmproxy would keep every message for the socket's lifetime

    def end(self, flow: http.HTTPFlow, reason: str = "") -> None:
        conn: WSConnection | None = flow.metadata.pop(_SOCKET, None)
        if conn is None:
            return
        self.open -= 1
        ws: Any = flow.websocket
        by_client = ws.closed_by_client if ws is not None else None
        why = reason or (f"code {ws.close_code}" if ws is not None and ws.close_code else "")
        conn.on_close(by_client, time.monotonic(), why)
