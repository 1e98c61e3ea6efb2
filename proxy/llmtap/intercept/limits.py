"""Connection limits and destinations the proxy refuses: a mitmproxy addon, plus the file-descriptor limit.

- **File descriptors.** :func:`raise_nofile` lifts the soft ``RLIMIT_NOFILE`` to the hard limit
  at start (the inherited soft limit is often 1,024: that many idle clients took the proxy and
  ``/healthz`` down).
- **Client connections.** At most ``max_clients`` at once (default 4,096, and never within 256 of
  the descriptor limit). At the cap the connection that has been idle longest (no request in
  flight) is closed for the new one; if every connection is busy the new one is refused. A client
  that sends no request within ``header_timeout`` seconds of connecting is closed. Each of these
  is counted (``llmtap_client_connections_dropped_total{reason}``, the open ones in
  ``llmtap_client_connections``) and logged at most once per 10 s. Idle keep-alive connections
  stay up to mitmproxy's ``tcp_timeout`` (35 min: reasoning models can be silent that long).
- **Destinations.** The proxy never connects to a loopback (or unspecified) address unless that
  host and port is intercepted on purpose (``--intercept``, ``--connect-to``), and never to the
  admin listener: a proxy user could otherwise reach the admin API, or any local service,
  through the proxy. A ``CONNECT`` to such a target is answered 403; a name that resolves to
  one is cut on the connected peer address, before any request byte is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .routing import parse_host_port

log = logging.getLogger("llmtap.limits")

DEFAULT_MAX_CLIENTS = 4096
DEFAULT_HEADER_TIMEOUT = 30.0
FD_RESERVE = 256  # descriptors kept for upstream connections, the store, the admin API, logs
LOG_EVERY_S = 10.0


def raise_nofile() -> tuple[int, int]:
    """Soft ``RLIMIT_NOFILE`` → hard; returns (soft, hard) in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, e)
    return soft, hard


def client_cap(requested: int) -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, min(requested, soft - FD_RESERVE)) if soft != resource.RLIM_INFINITY else requested


def _ip(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(value.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def is_local(value: str) -> bool:
    ip = _ip(value)
    return ip is not None and (ip.is_loopback or ip.is_unspecified)


@dataclass
class _Client:
    since: float
    last: float
    busy: int = 0  # requests (or tunnels) in flight
    seen_request: bool = False
    timer: asyncio.TimerHandle | None = None


@dataclass
class LimitsConfig:
    max_clients: int = DEFAULT_MAX_CLIENTS
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    admin: tuple[str, int] | None = None  # the admin listener: never a destination
    listen: tuple[str, int] | None = None  # the proxy's own listener: never a destination (a loop)
    intercept: list[str] = field(default_factory=list)  # host[:port]: loopback allowed for these
    connect_to: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    on_drop: Callable[[str], None] | None = None  # reason → count it
    on_open: Callable[[int], None] | None = None  # open client connections → gauge


class ConnectionLimits:
    """The mitmproxy addon enforcing the above (hooks run on the proxy's event loop)."""

    def __init__(self, cfg: LimitsConfig) -> None:
        self.cfg = cfg
        self.max_clients = client_cap(cfg.max_clients)
        self.clients: dict[str, _Client] = {}
        self._dropped: dict[str, int] = {}
        self._last_log = 0.0
        self._allowed = self._explicit(cfg)

    @staticmethod
    def _explicit(cfg: LimitsConfig) -> set[tuple[str, int | None]]:
        allowed: set[tuple[str, int | None]] = {(h.lower(), p) for h, p in cfg.connect_to}
        for spec in cfg.intercept:
            try:
                allowed.add(parse_host_port(spec))
            except ValueError:
                pass
        return allowed

    # -- client connections --------------------------------------------------------------------
    def client_connected(self, client: Any) -> None:
        now = time.monotonic()
        if len(self.clients) >= self.max_clients and not self._evict():
            client.error = "llmtap: too many client connections"
            self._drop("cap")
            return
        state = _Client(now, now)
        self.clients[client.id] = state
        if self.cfg.header_timeout > 0:
            loop = asyncio.get_running_loop()
            state.timer = loop.call_later(self.cfg.header_timeout, self._header_timeout, client.id)
        self._opened()

    def client_disconnected(self, client: Any) -> None:
        state = self.clients.pop(client.id, None)
        if state is not None and state.timer is not None:
            state.timer.cancel()
        self._opened()

    def _opened(self) -> None:
        if self.cfg.on_open is not None:
            self.cfg.on_open(len(self.clients))

    def _began(self, client: Any) -> None:
        self._seen(client)
        state = self.clients.get(client.id)
        if state is not None:
            state.busy += 1

    def _ended(self, client: Any) -> None:
        state = self.clients.get(client.id)
        if state is not None:
            state.busy = max(state.busy - 1, 0)
            state.last = time.monotonic()

    def _seen(self, client: Any) -> None:
        state = self.clients.get(client.id)
        if state is not None:
            state.last = time.monotonic()
            if not state.seen_request:
                state.seen_request = True
                if state.timer is not None:
                    state.timer.cancel()
                    state.timer = None

    def requestheaders(self, flow: Any) -> None:
        self._began(flow.client_conn)

    def http_connect(self, flow: Any) -> None:
        self._seen(flow.client_conn)  # requests inside an intercepted tunnel count one by one
        if flow.response is None:  # not already refused (proxy auth)
            self.refuse_target(flow)

    def response(self, flow: Any) -> None:
        self._ended(flow.client_conn)

    def error(self, flow: Any) -> None:
        self._ended(flow.client_conn)

    def tcp_start(self, flow: Any) -> None:
        self._began(flow.client_conn)  # a raw tunnel: busy while it lasts

    def tcp_end(self, flow: Any) -> None:
        self._ended(flow.client_conn)

    def tcp_error(self, flow: Any) -> None:
        self._ended(flow.client_conn)

    def _header_timeout(self, client_id: str) -> None:
        state = self.clients.get(client_id)
        if state is not None and not state.seen_request:
            self._kill(client_id)
            self._drop("header_timeout")

    def _evict(self) -> bool:
        idle = [(s.last, cid) for cid, s in self.clients.items() if s.busy == 0]
        if not idle:
            return False
        _, cid = min(idle)
        self._kill(cid)
        self.clients.pop(cid, None)
        self._drop("evicted_idle")
        return True

    def _kill(self, client_id: str) -> None:
        """Close a client connection (mitmproxy's handler then ends it as if the client had left)."""
        from mitmproxy import ctx

        with contextlib.suppress(Exception):
            handler = ctx.master.addons.get("proxyserver").connections.get(client_id)
            if handler is not None:
                handler.transports[handler.client].writer.close()

    def _drop(self, reason: str) -> None:
        self._dropped[reason] = self._dropped.get(reason, 0) + 1
        if self.cfg.on_drop is not None:
            self.cfg.on_drop(reason)
        now = time.monotonic()
        if now - self._last_log >= LOG_EVERY_S:
            self._last_log = now
            counts = ", ".join(f"{k}={v}" for k, v in sorted(self._dropped.items()))
            log.warning(
                "client connections dropped (%s; %d open, cap %d): see --max-client-connections",
                counts,
                len(self.clients),
                self.max_clients,
            )
            self._dropped.clear()

    # -- destinations ---------------------------------------------------------------------------
    def _explicitly_allowed(self, host: str, port: int) -> bool:
        host = host.lower()
        return (host, port) in self._allowed or (host, None) in self._allowed

    @staticmethod
    def _is_own(listener: tuple[str, int] | None, ip: str, port: int) -> bool:
        if listener is None or port != listener[1]:
            return False
        bind = _ip(listener[0])
        return is_local(ip) or (bind is not None and _ip(ip) == bind) or (bind is not None and bind.is_unspecified)

    def _refusal(self, host: str, port: int, ips: list[str]) -> str:
        for own, what in ((self.cfg.admin, "admin API"), (self.cfg.listen, "proxy listener")):
            if any(self._is_own(own, ip, port) for ip in ips) or (
                host.lower() == "localhost" and self._is_own(own, "::1", port)
            ):  # the listener: a connection that reached it unredirected in transparent mode would loop
                return f"llmtap: refusing to proxy to its own {what} ({host}:{port})"
        if self._explicitly_allowed(host, port):
            return ""
        if host.lower() == "localhost" or host.lower().endswith(".localhost") or any(is_local(ip) for ip in ips):
            return f"llmtap: refusing to proxy to a loopback address ({host}:{port}); --intercept it to allow"
        return ""

    def refuse_target(self, flow: Any) -> None:
        """A CONNECT or plain request whose literal target is refused: answered 403 at once."""
        host, port = flow.request.host, flow.request.port
        why = self._refusal(host, port, [host])
        if why:
            from mitmproxy import http

            flow.response = http.Response.make(403, why.encode() + b"\n", {"content-type": "text/plain"})
            self._drop("refused_destination")

    def server_connect(self, data: Any) -> None:
        """Before connecting: a literal loopback address or a localhost name (no lookup here; names
        that resolve to loopback are caught on the connected peer, before any byte is sent)."""
        address = data.server.address
        if not address:
            return
        host, port = str(address[0]), int(address[1])
        why = self._refusal(host, port, [host])
        if why:
            data.server.error = why
            self._drop("refused_destination")

    def server_connected(self, data: Any) -> None:
        peer = data.server.peername
        address = data.server.address
        if not peer or not address:
            return
        why = self._refusal(str(address[0]), int(address[1]), [str(peer[0])])
        if why:  # the name resolved to a refused address this time (DNS rebinding): cut it
            log.warning("%s (resolved to %s)", why, peer[0])
            self._drop("refused_destination")
            from mitmproxy import ctx

            with contextlib.suppress(Exception):
                handler = ctx.master.addons.get("proxyserver").connections.get(data.client.id)
                handler.transports[data.server].writer.close()
