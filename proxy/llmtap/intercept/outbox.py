"""The proxy worker's side of the handoff: messages batched off the loop to the recorder's process.

:meth:`Outbox.put` appends to the current batch and returns; the batch goes out in one write
:data:`LINGER_S` later (every call that ended meanwhile rides along), through an asyncio transport,
so the loop never blocks on the recorder. If the recorder falls behind by more than
:data:`MAX_BUFFER` bytes, batches are dropped and counted (``records_dropped{reason="handoff_full"}``
once the count reaches the recorder) rather than held: the traffic comes first.

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
    def __init__(self, on_lost: Callable[[], None]) -> None:
        self._on_lost = on_lost

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost()


class Outbox:
    def __init__(self) -> None:
        self._batch: list[handoff.Message] = []
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False
        self.dropped = 0  # messages dropped because the recorder fell behind

    async def connect(self, sock: socket.socket, on_lost: Callable[[], None]) -> None:
        self._loop = asyncio.get_running_loop()
        transport, _ = await self._loop.connect_accepted_socket(lambda: _Protocol(on_lost), sock)
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
        if t.get_write_buffer_size() > MAX_BUFFER:
            self.dropped += len(batch)
            log.warning("the recorder is %d MiB behind: %d messages dropped", MAX_BUFFER >> 20, len(batch))
            return
        t.write(handoff.encode(batch))

    def close(self) -> None:
        self.flush()
        if self._transport is not None:
            self._transport.close()
