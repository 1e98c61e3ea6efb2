"""The WebSocket adapter family: one adapter per socket turns its messages into calls.

An HTTP adapter sees one request and one response. A WebSocket carries many calls over one
connection: a :class:`WSAdapter` (one per socket) sees every message already parsed, decides
which call (a :class:`Turn`) each belongs to, and feeds each call's events to an ordinary
per-call :class:`~llmtap.adapters.base.Adapter` — Responses WebSocket mode reuses the SSE
adapter's event parsing as is. A call ends at its terminal event or when the socket closes;
the capture takes finished calls with :meth:`WSAdapter.take` after every message, so a socket
open for hours holds only the state of the calls in flight.

Like the HTTP adapters, each WebSocket adapter declares its ``routes`` (on the upgrade
request's path, method ``GET``); :func:`llmtap.adapters.route_ws` loops over them.

Thread contract: every method runs on the proxy's event loop, one message at a time per
socket. Cheap and pure (no I/O); it may raise — the capture catches, stops parsing that
socket, counts it, and the frames still flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import parse_qsl

from ..providers import ProviderName
from ..record import Api, Operation
from .base import Adapter, Route


@dataclass(slots=True)
class Turn:
    """One call on a socket: what started it and the response it got."""

    adapter: Adapter  # the per-call adapter: request info and the observation
    raw: bytes  # the client message that started it (b"" when the server started it: a VAD turn)
    request: Any  # that message, parsed
    start: float  # monotonic time the sidecar received what started the call
    first_server: float | None = None  # the call's first server event (its ttfb)
    response_bytes: int = 0  # server message payload bytes belonging to the call
    end: float | None = None  # its terminal event

    def server(self, size: int, t: float) -> None:
        if self.first_server is None:
            self.first_server = t
        self.response_bytes += size


MAX_OPEN_CALLS = 64  # calls asked for and not answered, per socket: past it the oldest is given up


class WSAdapter:
    """Base class: subclasses set ``api``/``routes`` and implement the two message hooks."""

    api: ClassVar[Api] = ""
    operation: ClassVar[Operation] = "chat"
    routes: ClassVar[tuple[Route, ...]] = ()  # matched against the upgrade request (method GET)
    default_provider: ClassVar[ProviderName] = "openai_compatible"
    call_adapter: ClassVar[type[Adapter]] = Adapter  # what a failed upgrade (a 4xx) is recorded with

    def __init__(self, model: str = "") -> None:
        self.model = model  # named in the upgrade URL (Realtime's ?model=), '' if not
        self._done: list[Turn] = []

    def on_client(self, obj: Any, raw: bytes, t: float) -> None:
        """A client message (``obj`` parsed from ``raw``; ``None`` if it was not JSON)."""

    def on_server(self, obj: Any, text: str, size: int, t: float) -> None:
        """A server message: ``obj`` parsed from ``text`` (``None`` if it was not JSON)."""

    def finished(self, turn: Turn, t: float) -> None:
        turn.end = t
        self._done.append(turn)

    def take(self) -> list[Turn]:
        """The calls that finished since the last call."""
        done, self._done = self._done, []
        return done

    def close(self) -> list[Turn]:
        """The socket closed: the calls still open (they never got their terminal event)."""
        return []


def query_param(query: str, *names: str) -> str:
    """The first of ``names`` present in a URL query string (values URL-decoded)."""
    params = dict(parse_qsl(query, keep_blank_values=False))
    for name in names:
        if params.get(name):
            return params[name][:256]
    return ""
