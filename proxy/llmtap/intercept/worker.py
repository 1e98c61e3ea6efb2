"""A proxy worker: one process running mitmproxy with llmtap's addon, handing every call off.

``llmtap run`` (the supervisor, :mod:`llmtap.workers`) binds the proxy's port once and starts
``--workers`` of these with ``python -m llmtap.intercept.worker CHANNEL_FD LISTEN_FD``: each
accepts connections on the same listening socket, so the kernel spreads clients over them and
every core carries traffic. The channel is one end of a socketpair: the supervisor writes this
worker's :class:`WorkerSettings` on it first (as JSON: secrets such as the proxy credentials never
appear on a command line), then the worker writes :mod:`llmtap.handoff` batches on it for as long
as it runs.

A worker holds no record, no store, no secret but the interception CA: it imports mitmproxy and the
routing tables, nothing of the recorder (pricing, metrics, the engine), so each costs only the
proxy's own memory. It dies with its supervisor (``PR_SET_PDEATHSIG``), drains on ``SIGTERM`` like the
single proxy did (:mod:`.drain`), and ignores terminal signals: it lives in its own process group,
and the supervisor tells it when to stop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import handoff
from ..decode.websocket import DEFAULT_MAX_MESSAGE_BYTES
from ..decode.wsframes import DEFAULT_MAX_INFLATE

log = logging.getLogger("llmtap.worker")
_LEN = struct.Struct("<I")


@dataclass
class WorkerSettings:
    """Everything a worker needs, sent by the supervisor as JSON on the channel."""

    index: int
    listen: tuple[str, int]
    confdir: str
    allow_hosts: list[str]
    mode: str = "regular"  # mitmproxy's mode spec (--mode; local mode also excludes the supervisor)
    intercept: list[str] = field(default_factory=list)
    upstream_bundle: str = ""
    proxy_auth: str = ""
    connect_to: list[tuple[str, int, str, int]] = field(default_factory=list)
    drain_timeout: float = 30.0
    max_clients: int = 4096
    header_timeout: float = 30.0
    admin: tuple[str, int] | None = None
    log_level: str = "info"
    log_format: str = "text"
    event_loop: str = ""  # '' (asyncio) or 'uvloop'
    ws_max_message: int = DEFAULT_MAX_MESSAGE_BYTES  # the WebSocket relay's bounds (.wsrelay)
    ws_max_inflate: int = DEFAULT_MAX_INFLATE

    def to_bytes(self) -> bytes:
        data = json.dumps(asdict(self)).encode()
        return _LEN.pack(len(data)) + data

    @classmethod
    def read(cls, sock: socket.socket) -> WorkerSettings:
        head = _recv_exactly(sock, 4)
        raw = json.loads(_recv_exactly(sock, _LEN.unpack(head)[0]))
        raw["listen"] = tuple(raw["listen"])
        raw["admin"] = tuple(raw["admin"]) if raw["admin"] else None
        raw["connect_to"] = [tuple(x) for x in raw["connect_to"]]
        return cls(**raw)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        got = sock.recv(n - len(buf))
        if not got:
            raise ConnectionError("the supervisor closed the channel")
        buf += got
    return bytes(buf)


class _Counters:
    """What the limits addon reports, kept for the next :class:`~llmtap.handoff.WorkerState`."""

    def __init__(self) -> None:
        self.clients = 0
        self.dropped: dict[str, int] = {}

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def open(self, n: int) -> None:
        self.clients = n


async def _report(settings: WorkerSettings, addon: Any, counters: _Counters, put: Any, error: list[str]) -> None:
    """The worker's state, whenever it changes (at most every ``STATE_EVERY_S``), and every second."""
    last: handoff.WorkerState | None = None
    sent_at = 0.0
    while True:
        state = handoff.WorkerState(
            settings.index, addon.running_since is not None, addon.draining, addon.inflight, addon.ws.open,
            len(asyncio.all_tasks()), counters.clients, dict(counters.dropped), error[0] if error else "",
        )  # fmt: skip
        now = time.monotonic()
        if last is None or state[1:6] != last[1:6] or state[6:] != last[6:] or now - sent_at >= 1.0:
            put(state)
            last, sent_at = state, now
        await asyncio.sleep(handoff.STATE_EVERY_S)


async def run(settings: WorkerSettings, channel: socket.socket, listener: socket.socket) -> None:
    from ..startup import StartupError
    from .addon import AddonConfig, LlmTapAddon
    from .limits import LimitsConfig
    from .mitm import ProxySettings, serve
    from .outbox import Outbox
    from .wsrelay import WSLimits

    outbox = Outbox()
    stop_now: list[Any] = []

    def supervisor_gone() -> None:
        for cut in stop_now:
            cut()

    await outbox.connect(channel, supervisor_gone)
    addon = LlmTapAddon(AddonConfig(intercept=settings.intercept, listen=settings.listen), outbox.put)
    counters = _Counters()
    error: list[str] = []
    reporter = asyncio.create_task(_report(settings, addon, counters, outbox.put, error))
    proxy = ProxySettings(
        listen=settings.listen,
        confdir=Path(settings.confdir),
        allow_hosts=settings.allow_hosts,
        mode=settings.mode,
        upstream_bundle=Path(settings.upstream_bundle) if settings.upstream_bundle else None,
        proxy_auth=settings.proxy_auth,
        connect_to={(h, p): (a, ap) for h, p, a, ap in settings.connect_to},
        drain_timeout=settings.drain_timeout,
        limits=LimitsConfig(
            max_clients=settings.max_clients,
            header_timeout=settings.header_timeout,
            admin=settings.admin,
            intercept=settings.intercept,
            on_drop=counters.drop,
            on_open=counters.open,
        ),
        ws=WSLimits(settings.ws_max_message, settings.ws_max_inflate),
    )
    try:
        await serve(proxy, addon, listener=listener, on_stop=stop_now.append)
    except StartupError as e:
        error.append(str(e))
        raise
    finally:
        reporter.cancel()
        if error or addon.running_since is not None:
            outbox.put(
                handoff.WorkerState(
                    settings.index, False, True, addon.inflight, addon.ws.open, 0, counters.clients,
                    dict(counters.dropped), error[0] if error else "",
                )
            )  # fmt: skip
        outbox.close()
        await asyncio.sleep(0)  # let the transport write what it holds


def main(argv: list[str]) -> int:
    from ..startup import die_with_parent

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides (it forwards SIGTERM)
    channel = socket.socket(fileno=int(argv[0]))
    listener = socket.socket(fileno=int(argv[1]))
    settings = WorkerSettings.read(channel)
    from ..telemetry.logs import setup_logging

    setup_logging(settings.log_level, settings.log_format)
    from ..startup import StartupError
    from .mitm import event_loop_factory

    try:
        asyncio.run(run(settings, channel, listener), loop_factory=event_loop_factory(settings.event_loop))
    except StartupError:
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
