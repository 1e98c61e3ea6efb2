"""Graceful shutdown: SIGTERM/SIGINT drain the proxy instead of cutting its streams.

mitmproxy's own shutdown (``Master.shutdown``) ends ``Master.run`` at once; ``asyncio.run`` then
cancels every connection task, so each in-flight stream ends as an upstream protocol error and
the loop logs a ``CancelledError`` traceback per connection. A rollout would book every
running call as a provider error. Instead, on the first signal:

1. stop accepting connections (the proxy's listeners close: ``Proxyserver.servers.update([])``,
   as mitmproxy does when a mode is removed); ``/healthz`` says ``draining`` (503), and HTTP/1
   responses carry ``Connection: close`` so kept-alive clients do not send the next call here;
2. let the calls in flight finish, up to ``--drain-timeout`` (a second signal stops waiting);
3. record the calls still running as ``outcome = cancelled``, ``error_code = sidecar_shutdown``
   (``EndKind`` ``sidecar_shutdown``), then close every client connection the way mitmproxy's
   idle timeout does (cancelling the connection's handler task, which mitmproxy handles quietly),
   and only then stop the master. Nothing is left for ``asyncio.run`` to cancel.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("llmtap.drain")
CLOSE_WAIT_S = 5.0  # how long closed connections get to unwind before the master stops


class Stop:
    """The shutdown request: the first signal drains, a second one cuts at once."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.now = asyncio.Event()

    def request(self) -> None:
        if self.requested.is_set():
            self.now.set()
        self.requested.set()

    def cut(self) -> None:
        """Stop at once (the supervisor is gone: nobody would record what the drain waits for)."""
        self.requested.set()
        self.now.set()


async def drain(master: Any, addon: Any, stop: Stop, timeout: float) -> None:
    await stop.requested.wait()
    loop = asyncio.get_running_loop()
    addon.draining = True
    log.info("draining: no new connections; %d calls in flight get up to %.0fs", addon.inflight, timeout)
    proxyserver = master.addons.get("proxyserver")
    if proxyserver is not None:
        try:
            await proxyserver.servers.update([])
        except Exception as e:  # a listener that will not close must not stop the shutdown
            log.warning("draining: closing the listener failed: %s", e)
    deadline = loop.time() + timeout
    while addon.inflight and not stop.now.is_set():
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        try:
            await asyncio.wait_for(stop.now.wait(), min(remaining, 0.05))
        except TimeoutError:
            pass
    cut = addon.cut_inflight()
    if cut:
        log.warning("drain: %d calls still running were cut and recorded as cancelled (sidecar_shutdown)", cut)
    if proxyserver is not None:
        await close_connections(proxyserver, loop)
    master.shutdown()


async def close_connections(proxyserver: Any, loop: asyncio.AbstractEventLoop) -> None:
    for handler in list(proxyserver.connections.values()):
        io = handler.transports.get(handler.client)
        if io is not None and io.handler is not None:
            io.handler.cancel("sidecar shutdown")
    deadline = loop.time() + CLOSE_WAIT_S
    while proxyserver.connections and loop.time() < deadline:
        await asyncio.sleep(0.02)
