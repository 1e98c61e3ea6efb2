"""Per-socket capture on the event loop: WebSocket messages in, one capture per call out.

The addon hands every message of an intercepted WebSocket to :meth:`WSConnection.on_message`
(its bytes relayed already, unchanged), a message the relay passed on without assembling it
(over ``--ws-max-message-mb``) to :meth:`WSConnection.on_unparsed`, and the close to
:meth:`WSConnection.on_close`. Messages are decoded as JSON
(:class:`~llmtap.decode.WSMessageDecoder`) and given to the socket's
:class:`~llmtap.adapters.WSAdapter`; each call it finishes becomes an ordinary
:class:`~.tee.Capture` — its request facts are the message that started it, its "response
headers" the call's first server event — and goes to the pipeline like an HTTP call.

Memory: nothing here keeps a message. What a socket holds between messages is the state of
the calls in flight (their adapters and the messages that started them).

Thread contract: every method runs on the proxy's event loop and must stay cheap; it never
raises (a failure stops parsing for the socket, is counted, and the frames still flow).
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable

from ..adapters import Turn, WSAdapter
from ..decode import WSMessageDecoder
from ..decode.websocket import DEFAULT_MAX_MESSAGE_BYTES
from ..errors import LlmtapError
from ..record import EndKind
from .tee import Capture, End, ParseErrorHook, RequestFacts, parse_failed

Submit = Callable[[Capture, End], None]


class MessageNotParsed(LlmtapError, ValueError):
    pass


class WSConnection:
    """One intercepted WebSocket: ``facts`` describe its upgrade request (the template every call's
    facts are made from), ``headers`` the upgrade response's."""

    def __init__(
        self,
        facts: RequestFacts,
        adapter: WSAdapter,
        submit: Submit,
        headers: list[tuple[str, str]],
        on_parse_error: ParseErrorHook | None = None,
        keep_trace: bool = False,
        max_message: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.facts = facts
        self.adapter = adapter
        self._submit = submit
        self.headers = headers
        self._on_parse_error = on_parse_error
        self._keep_trace = keep_trace  # the upgrade carried a traceparent: every call joins that trace
        self._decoder = WSMessageDecoder(max_message)
        self.parsing = True
        self.parse_error = ""
        self.messages = 0
        self.calls = 0

    # -- event loop ------------------------------------------------------------------------------
    def on_message(self, from_client: bool, content: bytes, t: float) -> None:
        self.messages += 1
        if not self.parsing:
            return
        try:
            for obj, text in self._decoder.feed(content) or [(None, "")]:
                if from_client:
                    self.adapter.on_client(obj, content, t)
                else:
                    self.adapter.on_server(obj, text, len(content), t)
            for turn in self.adapter.take():
                self._emit(turn, self._finished(turn, t))
        except Exception as e:
            self._failed(e)

    def on_unparsed(self, from_client: bool, why: str, stop: bool) -> None:
        """A message relayed without being parsed (``why``): counted, and said on the calls that follow;
        ``stop``: the relay no longer reads the socket, so neither does the capture."""
        self.messages += 1
        err = MessageNotParsed(f"WebSocket {'client' if from_client else 'server'} {why}")
        if stop:
            self._failed(err)
            return
        note = parse_failed(self.facts.api, err, self._on_parse_error)
        self.parse_error = self.parse_error or note

    def on_close(self, closed_by_client: bool | None, t: float, reason: str = "") -> None:
        """The socket ended: calls still open were cut — by the client (cancelled) or by the server
        or the network (an error)."""
        try:
            turns = [*self.adapter.take(), *self.adapter.close()]
        except Exception as e:
            self._failed(e)
            return
        kind: EndKind = "client_disconnected" if closed_by_client else "upstream_error"
        who = "client" if closed_by_client else "server" if closed_by_client is False else "connection"
        msg = f"WebSocket closed by the {who} before the response finished" + (f" ({reason})" if reason else "")
        for turn in turns:
            self._emit(turn, self._finished(turn, t) if turn.end is not None else End(kind, t, msg))

    # -- helpers ---------------------------------------------------------------------------------
    @staticmethod
    def _finished(turn: Turn, t: float) -> End:
        end = turn.end if turn.end is not None else t
        obs = turn.adapter.obs
        if obs.finish == "cancelled" and not obs.terminal:  # the server reports the client's cancel
            return End("client_disconnected", end, "cancelled by the client")
        return End("complete", end)

    def _emit(self, turn: Turn, end: End) -> None:
        f = self.facts
        facts = dataclasses.replace(
            f,
            body=turn.raw,
            start_wall=f.start_wall + (turn.start - f.start_mono),
            start_mono=turn.start,
            trace_id=f.trace_id if self._keep_trace else secrets.token_hex(16),
            span_id=secrets.token_hex(8),
        )
        self.calls += 1
        self._submit(Capture.for_turn(facts, turn, self.headers, self.parse_error, self._on_parse_error), end)

    def _failed(self, e: BaseException) -> None:
        self.parsing = False
        self.parse_error = parse_failed(self.facts.api, e, self._on_parse_error)
