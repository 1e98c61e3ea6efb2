"""The proxy worker's side of the handoff: messages batched off the loop to the recorder's process.

:meth:`Outbox.put` appends to the current batch and returns; the batch goes out in one write
:data:`LINGER_S` later (every call that ended meanwhile rides along), through an asyncio transport,
so the loop never blocks on the recorder. If the recorder falls behind by more than
:data:`MAX_BUFFER` bytes, the bulk of the next batches — request and response chunks — is not sent
(a :class:`~llmtap.handoff.Gap` says how much of which call): the traffic comes first, every call
is still recorded (from what its transport showed, and saying so), and the buffer stops growing.

A read in the supervisor first sends each worker a :class:`~llmtap.handoff.Barrier`: the worker writes
what it holds and echoes the barrier, so the read sees every call that had ended.

If the supervisor goes away (its end of the socketpair closes), the worker has nobody to record
for and stops (``on_lost``); a SIGKILLed supervisor also takes its workers with it (``PR_SET_PDEATHSIG``,
:mod:`.worker`).

Thread contract: every method runs on the worker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

from .. import handoff

log = logging.getLogger("llmtap.worker")

LINGER_S = 0.02  # how long a batch waits for more messages before it is written (one write per batch)
MAX_BUFFER = 64 << 20  # bytes waiting for the recorder before batches are dropped


class _Protocol(asyncio.Protocol):
    """The supervisor's side of the conversation: barriers (echoed after everything before them), and its end."""

    def __init__(self, outbox: Outbox, on_lost: Callable[[], None]) -> None:
        self._outbox = outbox
        self._on_lost = on_lost
        self._decoder = handoff.Decoder()

    def data_received(self, data: bytes) -> None:
        for msg in self._decoder.feed(data):
            if isinstance(msg, handoff.Barrier):
                self._outbox.put(msg)
                self._outbox.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost()


def _gap(m: handoff.Message) -> handoff.Message:
    if isinstance(m, handoff.Body):
        return handoff.Gap(m.call, False, sum(len(c) for _, c in m.chunks))
    if isinstance(m, handoff.RequestPart):
        return handoff.Gap(m.call, True, sum(len(c) for c in m.chunks))
    return m


class Outbox:
    def __init__(self) -> None:
        self._batch: list[handoff.Message] = []
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False

    async def connect(self, sock: socket.socket, on_lost: Callable[[], None]) -> None:
        self._loop = asyncio.get_running_loop()
        transport, _ = await self._loop.connect_accepted_socket(lambda: _Protocol(self, on_lost), sock)
        self._transport = transport

    def put(self, msg: handoff.Message) -> None:
        self._batch.append(msg)
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_later(LINGER_S, self.flush)

    def flush(self) -> None:
        self._scheduled = False
        batch, self._batch = self._batch, []
        t = self._transport
        if not batch or t is None or t.is_closing():
            return
        if t.get_write_buffer_size() > MAX_BUFFER:  # the calls still go; their bulk bytes do not
            batch = [_gap(m) for m in batch]
        t.write(handoff.encode(batch))

    def close(self) -> None:
        self.flush()
        if self._transport is not None:
            self._transport.close()
