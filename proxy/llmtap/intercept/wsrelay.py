"""WebSockets relayed byte for byte and read on the side within bounds: mitmproxy's WebSocket layer, replaced.

mitmproxy's own layer (``mitmproxy.proxy.layers.websocket``, wsproto underneath) assembles each
message whole before the ``websocket_message`` hook, then re-frames and re-compresses it for the
other side. On the way it inflates permessage-deflate without a bound (a ~1 MB message inflating to
1 GiB took the sidecar from ~380 MB to ~2.5 GB and stalled every stream for 6 s), holds a message of
endless fragments whole (1 GiB held), and appends each piece of a frame to a ``bytes`` (quadratic:
one 256 MiB frame took over 49 s and was never delivered). llmtap never changes a message, so none
of that is needed: :class:`RelayLayer` sends every byte on the moment it arrives — masks, fragments
and compression exactly as the peer sent them — and reads a copy of each direction with a
:class:`~llmtap.decode.wsframes.MessageReader`: messages up to ``--ws-max-message`` are assembled
(fragments joined once), inflated at most :data:`LOOP_STEP` bytes per event-loop step (the rest on
the next step, through a mitmproxy wake-up), and handed to the addon through mitmproxy's own
``websocket_message`` hook as before. A longer message is relayed untouched and reaches the addon
as an :class:`UnparsedMessage` (its size, why); a direction the reader gives up on (a compressed
message inflating past ``--ws-max-inflate`` while the compression context carries over, a stream
that is not WebSocket) stops the capture of the socket, whose calls are booked with the reason.

:class:`WebSocketLimits` (an addon) registers the two options and puts :class:`RelayLayer` where
mitmproxy's HTTP layer looks its WebSocket layer up when a ``101`` completes
(``mitmproxy.proxy.layers.websocket.WebsocketLayer``, read at that moment:
``tests/unit/intercept/test_wsrelay.py`` checks it still is, for the mitmproxy installed).
Injected messages (mitmproxy's ``inject.websocket``) are not supported: llmtap does not offer it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import wsproto.utilities
from mitmproxy.proxy import commands, events, layer
from mitmproxy.proxy.layers import websocket as mitm_ws
from mitmproxy.proxy.utils import expect
from mitmproxy.websocket import WebSocketMessage
from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import Opcode

from ..decode.body import Bytes
from ..decode.websocket import DEFAULT_MAX_MESSAGE_BYTES
from ..decode.wsframes import DEFAULT_MAX_INFLATE, Closed, GaveUp, Message, MessageReader, Unparsed

# Payload bytes the side parser assembles or inflates per event-loop step, per direction. mitmproxy reads
# up to 64 KiB at a time and handles a burst of reads without yielding: a compressed burst inflating
# faster than this is finished on later steps instead.
LOOP_STEP = 256 * 1024
MAX_HELD = 256 * 1024 * 1024  # bytes the side parsers of all this process's sockets hold at once
OPT_MAX_MESSAGE = "llmtap_ws_max_message"
OPT_MAX_INFLATE = "llmtap_ws_max_inflate"
HELD = Bytes(MAX_HELD)  # what every socket's side parser in this process holds (one event loop: no lock)


@dataclass(frozen=True)
class WSLimits:
    max_message: int = DEFAULT_MAX_MESSAGE_BYTES  # bytes of one message assembled and parsed (after inflation)
    max_inflate: int = DEFAULT_MAX_INFLATE  # bytes of one compressed message inflated at most

    def reader(self, deflate: bool, reset_context: bool) -> MessageReader:
        """One direction's side parser (what it holds also taken from :data:`HELD`)."""
        return MessageReader(
            self.max_message,
            deflate=deflate,
            reset_context=reset_context,
            max_inflate=self.max_inflate,
            budget=HELD,
        )


class RelayedMessage(WebSocketMessage):
    """A message as the relay saw it, with ``arrived``: when its last bytes reached the relay
    (``time.monotonic()``, before they were passed on). The hook that records it runs later, after the
    event loop's other work: on a busy machine a mark taken there came milliseconds late, and a ttfb
    could come out shorter than the upstream's own pause."""

    def __init__(self, opcode: Opcode, from_client: bool, content: bytes, arrived: float) -> None:
        super().__init__(opcode, from_client, content)
        self.arrived = arrived


class UnparsedMessage(RelayedMessage):
    """A message the relay passed on without parsing it (``stop``: nor will it parse the socket any more)."""

    def __init__(self, from_client: bool, size: int, why: str, stop: bool, arrived: float) -> None:
        super().__init__(Opcode.BINARY, from_client, b"", arrived)
        self.size, self.why, self.stop = size, why, stop


def negotiated(extensions: str) -> tuple[bool, bool, bool]:
    """(permessage-deflate on, client starts a fresh context per message, server does) from the
    upgrade response's ``Sec-WebSocket-Extensions``, read by wsproto as mitmproxy reads it."""
    for ext in wsproto.utilities.split_comma_header(extensions.encode("ascii", "replace")):
        if ext.split(";", 1)[0].strip() == PerMessageDeflate.name:
            pmd = PerMessageDeflate()
            pmd.finalize(ext)
            return True, pmd.client_no_context_takeover, pmd.server_no_context_takeover
    return False, False, False


class RelayLayer(mitm_ws.WebsocketLayer):
    """mitmproxy's WebSocket layer for llmtap: bytes relayed as they come, messages read on the side."""

    readers: dict[bool, MessageReader]  # by from_client

    @expect(events.Start)
    def start(self, _: events.Event) -> layer.CommandGenerator[None]:
        opts = self.context.options
        limits = WSLimits(
            getattr(opts, OPT_MAX_MESSAGE, WSLimits.max_message), getattr(opts, OPT_MAX_INFLATE, WSLimits.max_inflate)
        )
        assert self.flow.response is not None
        deflate, client_reset, server_reset = negotiated(self.flow.response.headers.get("Sec-WebSocket-Extensions", ""))
        self.readers = {
            side: limits.reader(deflate, reset) for side, reset in ((True, client_reset), (False, server_reset))
        }
        self._closes: set[bool] = set()  # sides whose close frame went through
        now = time.monotonic()
        self._arrived = {True: now, False: now}  # per side: when its last bytes reached the relay
        self._ended = False  # the end hook ran: messages are no longer handed over
        self._stopped = False  # the capture was told to stop (a direction given up)
        self._waking = False  # a wake-up is requested (parsing left over from the last step)
        yield mitm_ws.WebsocketStartHook(self.flow)
        self._handle_event = self.relay

    _handle_event = start

    @expect(events.DataReceived, events.ConnectionClosed, mitm_ws.WebSocketMessageInjected, events.Wakeup)
    def relay(self, event: events.Event) -> layer.CommandGenerator[None]:
        if isinstance(event, events.Wakeup):
            self._waking = False
            yield from self._parse(LOOP_STEP)
            return
        if isinstance(event, mitm_ws.WebSocketMessageInjected):
            yield commands.Log("llmtap relays WebSocket bytes unchanged: injected messages are not supported")
            return
        assert isinstance(event, events.ConnectionEvent)
        from_client = event.connection == self.context.client
        if isinstance(event, events.DataReceived):
            self._arrived[from_client] = time.monotonic()
            yield commands.SendData(self.context.server if from_client else self.context.client, event.data)
            self._feed(from_client, event.data)
            yield from self._parse(LOOP_STEP)
            if self._closes == {True, False}:  # both close frames went through: done, as mitmproxy's layer is
                yield from self._finish(from_client)
        else:  # the peer closed its TCP connection
            yield from self._parse(self.readers[True].max_message)  # what it sent before, within one bound
            yield from self._finish(from_client)

    @expect(events.DataReceived, events.ConnectionClosed, mitm_ws.WebSocketMessageInjected, events.Wakeup)
    def done(self, _: events.Event) -> layer.CommandGenerator[None]:
        yield from ()

    # -- the side parser ---------------------------------------------------------------------------
    def _feed(self, from_client: bool, data: bytes) -> None:
        reader = self.readers[from_client]
        try:
            reader.feed(data)
        except Exception as e:  # never the relay's problem
            reader.give_up(f"{type(e).__name__}: {e}")

    def _parse(self, budget: int) -> layer.CommandGenerator[None]:
        for side, reader in self.readers.items():
            try:
                found = reader.drain(budget)
            except Exception as e:
                reader.give_up(f"{type(e).__name__}: {e}")
                found = reader.drain(0)
            for ev in found:
                yield from self._deliver(side, ev)
        if not self._waking and any(r.pending() for r in self.readers.values()):
            self._waking = True
            yield commands.RequestWakeup(0)

    def _deliver(self, side: bool, ev: Message | Unparsed | Closed | GaveUp) -> Iterator[Any]:
        ws = self.flow.websocket
        assert ws is not None
        if isinstance(ev, Closed):
            self._closes.add(side)
            if not self._ended:
                yield from self._end(side, 1005 if ev.code is None else ev.code, ev.reason)
            return
        if self._ended:
            return
        if isinstance(ev, Message):
            opcode = Opcode.TEXT if ev.text else Opcode.BINARY
            ws.messages.append(RelayedMessage(opcode, side, ev.payload, self._arrived[side]))
        elif isinstance(ev, Unparsed):
            ws.messages.append(UnparsedMessage(side, ev.size, ev.why, False, self._arrived[side]))
        else:
            if self._stopped:
                return
            self._stopped = True
            for reader in self.readers.values():  # the capture stops for the socket: both sides' reading too
                reader.give_up(ev.why)  # (their close frames are still seen)
            ws.messages.append(UnparsedMessage(side, 0, ev.why, True, self._arrived[side]))
        yield mitm_ws.WebsocketMessageHook(self.flow)

    def _end(self, by_client: bool, code: int, reason: str) -> Iterator[Any]:
        ws = self.flow.websocket
        assert ws is not None
        self._ended = True
        ws.timestamp_end = time.time()
        ws.closed_by_client, ws.close_code, ws.close_reason = by_client, code, reason
        yield mitm_ws.WebsocketEndHook(self.flow)

    def _finish(self, from_client: bool) -> layer.CommandGenerator[None]:
        if not self._ended:
            yield from self._end(from_client, 1006, "")  # no close frame: the connection went away
        for reader in self.readers.values():
            reader.close()
        yield commands.CloseConnection(self.context.client)
        yield commands.CloseConnection(self.context.server)
        self.flow.live = False
        self._handle_event = self.done


class WebSocketLimits:
    """The addon: the two bounds as mitmproxy options, and :class:`RelayLayer` in place of mitmproxy's layer."""

    def __init__(self, limits: WSLimits | None = None) -> None:
        self.limits = limits or WSLimits()
        self._original: Any = None

    def load(self, loader: Any) -> None:
        loader.add_option(OPT_MAX_MESSAGE, int, self.limits.max_message, "WebSocket message bytes llmtap parses")
        loader.add_option(OPT_MAX_INFLATE, int, self.limits.max_inflate, "compressed WebSocket message bytes inflated")
        install()

    def done(self) -> None:
        uninstall()


_MITMPROXY_LAYER = mitm_ws.WebsocketLayer


def install() -> None:
    mitm_ws.WebsocketLayer = RelayLayer  # type: ignore[misc]


def uninstall() -> None:
    mitm_ws.WebsocketLayer = _MITMPROXY_LAYER  # type: ignore[misc]
