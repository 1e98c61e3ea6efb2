"""The mock's WebSocket server (wsproto over the mock's TLS): OpenAI Responses WebSocket mode
and the Realtime API, with pacing, errors and mid-response closes.

An upgrade request is routed the way llmtap routes it (:func:`llmtap.adapters.route_ws`), to
a session class per API (:mod:`.ws_responses`, :mod:`.realtime`). A session turns each client
message into a script of steps — a server message, a pause, a close — played in its own task,
so pacing is real, responses on one socket overlap (lanes) and client messages keep being read
meanwhile (a ``response.cancel`` arrives mid-response).

Every payload the server received and sent is logged per socket (``GET /_mock/ws``), so a test
can compare it byte for byte with what the client got through llmtap. Knobs, on the upgrade
request: ``x-mock-delay-ms`` (gap between server events, default 5 ms or
``$LLMTAP_MOCK_DELAY_MS``), ``x-mock-scenario``; per response: ``metadata.mock_scenario``,
``metadata.mock_delay_ms``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import wsproto
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

from ...adapters import route_ws

MAX_LOGGED = 5000  # payloads kept per socket and direction (a soak runs for hours)


@dataclass
class Step:
    """One thing a session does: send ``message`` (after ``delay`` s), or close the socket."""

    message: Any = None  # a dict (sent as JSON text) or bytes
    delay: float = 0.0
    close: int | None = None  # a close code: send a close frame
    abort: bool = False  # drop the TCP connection without a close frame
    make: Callable[[], Any] | None = None  # the message, built when it is due (after the delay)
    when: Callable[[], bool] | None = None  # checked before the delay: False skips the step


@dataclass
class Socket:
    """What a session knows of its socket, and the log of its payloads."""

    path: str
    headers: dict[str, str]
    delay: float
    scenario: str
    received: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LOGGED))
    sent: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LOGGED))
    sent_at: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_LOGGED))  # wall clock, per sent
    counts: dict[str, int] = field(default_factory=lambda: {"n_received": 0, "n_sent": 0})
    closed: str = ""  # how the socket ended: "client", "server", "abort", "eof"
    hostile: dict[str, Any] = field(default_factory=dict)  # the hostile session's byte counts and hashes

    def log(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "headers": self.headers,
            "received": list(self.received),
            "sent": list(self.sent),
            "sent_at": list(self.sent_at),
            "closed": self.closed,
            "hostile": self.hostile,
            **self.counts,
        }


class Session:
    """Base: subclasses answer client messages with scripts of steps."""

    def __init__(self, sock: Socket) -> None:
        self.sock = sock

    def on_open(self) -> list[Step]:
        return []

    def on_message(self, obj: Any) -> list[Step]:
        return []

    def timer(self) -> tuple[float, Callable[[], list[Step]]] | None:
        """A pending server-side timer (Realtime's VAD silence), or None."""
        return None

    def delay_for(self, meta: dict[str, Any]) -> float:
        v = meta.get("mock_delay_ms") if isinstance(meta, dict) else None
        return float(v) / 1000.0 if isinstance(v, (int, float, str)) and str(v) else self.sock.delay


def _payload(message: Any) -> tuple[Any, str]:
    """(the wsproto event, its logged form)."""
    if isinstance(message, bytes):
        return BytesMessage(message), "b64:" + base64.b64encode(message).decode()
    text = message if isinstance(message, str) else json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return TextMessage(text), text


async def session(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    head: bytes,
    headers: dict[str, str],
    sockets: deque[Socket],
    default_delay_ms: float | None = None,
) -> None:
    from . import realtime, ws_responses

    sessions: dict[str, type[Session]] = {
        "openai.responses": ws_responses.ResponsesSession,
        "openai.realtime": realtime.RealtimeSession,
    }
    ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
    ws.receive_data(head)
    request = next((e for e in ws.events() if isinstance(e, Request)), None)
    if request is None:
        writer.close()
        return
    host = headers.get("host", "").split(":", 1)[0]
    match = route_ws(host, request.target, frozenset(headers))
    kind = sessions.get(match.api) if match is not None else None
    if kind is None:
        body = json.dumps({"error": {"message": f"no mock WebSocket at {request.target}"}}).encode()
        writer.write(
            ws.send(RejectConnection(status_code=404, headers=[(b"content-type", b"application/json")], has_body=True))
        )
        writer.write(ws.send(RejectData(body)))
        await writer.drain()
        writer.close()
        return
    given = headers.get("x-mock-delay-ms") or default_delay_ms
    delay = float(given if given is not None else 5) / 1000.0
    sock = Socket(request.target, headers, delay, headers.get("x-mock-scenario", ""))
    sockets.append(sock)
    if sock.scenario == "ws_hostile":  # raw frames: issue #26's bombs (.ws_hostile)
        from . import ws_hostile

        await ws_hostile.run(ws, request, reader, writer, sock)
        return
    sess = kind(sock)
    reject = getattr(sess, "reject", None)
    if callable(reject) and (refusal := reject()) is not None:  # a refused upgrade: 401, 429
        status, body_obj = refusal
        data = json.dumps(body_obj).encode()
        writer.write(
            ws.send(
                RejectConnection(
                    status_code=status,
                    headers=[(b"content-type", b"application/json"), (b"x-request-id", b"req_mock_ws_rejected")],
                    has_body=True,
                )
            )
        )
        writer.write(ws.send(RejectData(data)))
        await writer.drain()
        writer.close()
        return
    extra = [(b"x-request-id", b"req_mock_ws_1"), (b"openai-processing-ms", b"3")]
    writer.write(ws.send(AcceptConnection(extra_headers=extra)))
    await writer.drain()
    player = _Player(ws, writer, sock)
    partial = _Partial()
    player.play(sess.on_open())
    try:
        while not player.ended:
            timer = sess.timer()
            timeout = timer[0] if timer is not None else None
            try:
                data = await asyncio.wait_for(reader.read(65536), timeout)
            except TimeoutError:
                if timer is not None:
                    player.play(timer[1]())
                continue
            if not data:
                break
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, Message):
                    # wsproto hands over what has arrived of a message (a read's worth, a frame of a
                    # fragmented one): the message is whole at message_finished, whatever its size
                    message = partial.add(event)
                    if message is None:
                        continue
                    raw = message if isinstance(message, str) else "b64:" + base64.b64encode(message).decode()
                    sock.received.append(raw)
                    sock.counts["n_received"] += 1
                    try:
                        obj = json.loads(message) if isinstance(message, str) else None
                    except ValueError:
                        obj = None
                    player.play(sess.on_message(obj))
                elif isinstance(event, Ping):
                    writer.write(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    sock.closed = sock.closed or "client"
                    if ws.state == wsproto.connection.ConnectionState.REMOTE_CLOSING:
                        writer.write(ws.send(event.response()))
                        await writer.drain()
                    return
    except (ConnectionError, wsproto.utilities.LocalProtocolError):
        pass
    finally:
        await player.stop()
        try:
            writer.close()
        except Exception:
            pass


class _Partial:
    """The pieces of the client message being received, joined when its last piece arrives."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.data: list[bytes] = []

    def add(self, event: Message[Any]) -> str | bytes | None:
        if isinstance(event.data, str):
            self.text.append(event.data)
        else:
            self.data.append(bytes(event.data))
        if not event.message_finished:
            return None
        whole: str | bytes = "".join(self.text) if isinstance(event.data, str) else b"".join(self.data)
        self.text, self.data = [], []
        return whole


class _Player:
    """Plays each script in its own task: responses on one socket overlap (lanes, out-of-band
    Realtime responses), the steps of one script keep their order and pauses."""

    def __init__(self, ws: wsproto.WSConnection, writer: asyncio.StreamWriter, sock: Socket) -> None:
        self.ws, self.writer, self.sock = ws, writer, sock
        self.tasks: set[asyncio.Task[None]] = set()
        self.ended = False

    def play(self, script: list[Step]) -> None:
        if script and not self.ended:
            task = asyncio.create_task(self._run(script))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def stop(self) -> None:
        self.ended = True
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _run(self, script: list[Step]) -> None:
        ws, writer, sock = self.ws, self.writer, self.sock
        for step in script:
            if step.when is not None and not step.when():
                continue
            if step.delay:
                await asyncio.sleep(step.delay)
            if self.ended:
                return
            message = step.make() if step.make is not None else step.message
            try:
                if step.abort:
                    sock.closed, self.ended = "abort", True
                    writer.transport.abort()
                    return
                if step.close is not None:
                    sock.closed, self.ended = "server", True
                    writer.write(ws.send(CloseConnection(code=step.close, reason="mock closes mid-response")))
                    await writer.drain()
                    return
                event, logged = _payload(message)
                writer.write(ws.send(event))
                sock.sent.append(logged)
                sock.sent_at.append(time.time())
                sock.counts["n_sent"] += 1
                await writer.drain()
            except (ConnectionError, wsproto.utilities.LocalProtocolError):
                return
