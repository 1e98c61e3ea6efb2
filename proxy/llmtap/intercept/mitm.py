"""The part of mitmproxy the sidecar runs: a regular-mode proxy's addons, imported leanly, and the loop.

``mitmdump`` loads ~35 addons (replay, map-local, the mitm.it onboarding app, save,
scripts, ...) and mitmproxy offers every hook of every flow to each of them: under load
that dispatch alone was ~15% of the proxy's CPU. And ``mitmproxy.addons/__init__.py``
imports all of them to build that default list, pulling in flask, jinja2, ldap3 and
more: ~14 MB of resident memory for features llmtap does not use.

So the sidecar adds only what a regular-mode proxy needs, and imports the addon modules
without running the package's ``__init__``. That file holds nothing but those imports
and ``default_addons()`` (``tests/test_units.py`` checks it still does, for the
mitmproxy installed), so skipping it changes nothing else.
"""

from __future__ import annotations

import asyncio
import importlib.machinery
import importlib.util
import inspect
import logging
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import loopnoise
from ..startup import StartupError
from .drain import Stop, drain
from .limits import LimitsConfig, raise_nofile
from .wsrelay import WSLimits

ADDONS_PACKAGE = "mitmproxy.addons"


def _addons_namespace() -> None:
    """Make ``mitmproxy.addons`` a plain package of its submodules (its ``__init__`` not run)."""
    if ADDONS_PACKAGE in sys.modules:
        return
    import mitmproxy

    found = importlib.util.find_spec(ADDONS_PACKAGE)
    if found is None or found.submodule_search_locations is None:
        return  # a layout we do not know: import it the normal way
    spec = importlib.machinery.ModuleSpec(ADDONS_PACKAGE, None, is_package=True)
    spec.submodule_search_locations = list(found.submodule_search_locations)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = found.origin
    sys.modules[ADDONS_PACKAGE] = module
    mitmproxy.addons = module


def proxy_addons(proxy_auth: bool) -> list[Any]:
    """The addons, in mitmdump's order: options and commands (core), refusing clients from
    public addresses (block), h2c-upgrade refusal (disable_h2c), proxy auth when asked for,
    the servers (proxyserver), protocol detection (next_layer), TLS interception
    (tlsconfig), and exiting on startup errors (errorcheck)."""
    _addons_namespace()
    from mitmproxy.addons import block, core, disable_h2c, errorcheck, next_layer, proxyserver, tlsconfig

    addons: list[Any] = [core.Core(), block.Block(), disable_h2c.DisableH2C()]
    if proxy_auth:
        from mitmproxy.addons import proxyauth

        from .authlimit import addons as auth_budget

        before, after = auth_budget()  # failed guesses budgeted per client address
        addons += [before, proxyauth.ProxyAuth(), after]
    addons += [proxyserver.Proxyserver(), next_layer.NextLayer(), tlsconfig.TlsConfig(), errorcheck.ErrorCheck()]
    return addons


def lean_addon_manager(master: Any) -> None:
    """Replace ``master.addons`` by :class:`LeanAddons` (before any addon is added)."""
    master.options.changed.disconnect(master.addons._configure_all)
    master.addons = LeanAddons(master)


def _lean_addons_class() -> type:
    from mitmproxy import exceptions, flow
    from mitmproxy.addonmanager import AddonManager, traverse

    log = logging.getLogger("mitmproxy.addonmanager")

    class Lean(AddonManager):
        """mitmproxy's addon manager, with the hooks of every flow event dispatched from a list made once.

        mitmproxy looks every handler up again for each event — it walks each addon (and the addons it
        holds), asks each for the hook by name, enters a context manager per addon, rebuilds the event's
        arguments per addon — and follows every flow event with an ``update`` event to every addon. With a
        handful of addons that dispatch was a tenth of a proxy worker's CPU. Here each hook name maps to the
        handlers that have it (recomputed when an addon is added or removed), the event's arguments are built
        once, and ``update`` goes only where an addon handles it. Errors are what mitmproxy makes of them: a
        handler that raises is logged ("Addon error") and the others still run; ``AddonHalt`` stops the event.
        """

        def __init__(self, master: Any) -> None:
            super().__init__(master)
            self._handlers: dict[str, list[Any]] = {}

        def add(self, *addons: Any) -> None:
            self._handlers.clear()
            super().add(*addons)
            self._handlers.clear()

        def remove(self, addon: Any) -> None:
            self._handlers.clear()
            super().remove(addon)
            self._handlers.clear()

        def handlers(self, name: str) -> list[Any]:
            found = self._handlers.get(name)
            if found is None:
                found = [f for a in traverse(self.chain) if callable(f := getattr(a, name, None))]
                self._handlers[name] = found
            return found

        async def _dispatch(self, name: str, args: list[Any]) -> bool:
            """False when a handler halted the event."""
            for func in self.handlers(name):
                try:
                    res = func(*args)
                    if res is not None and inspect.isawaitable(res):
                        await res
                except exceptions.AddonHalt:
                    return False
                except exceptions.OptionsError:
                    raise
                except Exception as e:
                    log.error(f"Addon error: {e}", exc_info=True)
            return True

        async def handle_lifecycle(self, event: Any) -> None:
            args = event.args()
            await self._dispatch(event.name, args)
            if isinstance(args[0], flow.Flow) and self.handlers("update"):
                await self._dispatch("update", [[args[0]]])

    return Lean


class _LazyLean:
    cls: type | None = None


def LeanAddons(master: Any) -> Any:
    if _LazyLean.cls is None:
        _LazyLean.cls = _lean_addons_class()
    return _LazyLean.cls(master)


# Reasoning models can stay silent for many minutes: keep idle connections for 35 min.
TCP_TIMEOUT_S = 35 * 60


@dataclass
class ProxySettings:
    listen: tuple[str, int]
    confdir: Path
    allow_hosts: list[str]
    mode: str = "regular"  # mitmproxy's mode spec: regular, transparent or local[:SPEC] (--mode)
    upstream_bundle: Path | None = None
    proxy_auth: str = ""
    connect_to: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    drain_timeout: float = 30.0
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    ws: WSLimits = field(default_factory=WSLimits)


def install_connect_to(loop: asyncio.AbstractEventLoop, mapping: dict[tuple[str, int], tuple[str, int]]) -> None:
    """``--connect-to HOST:PORT:ADDR:PORT`` as curl does it: name resolution of HOST:PORT on
    the proxy's event loop yields ADDR:PORT. Everything else (TLS name, Host header, connection
    reuse) stays the original host's."""
    resolve = loop.getaddrinfo

    async def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and port is not None:
            target = mapping.get((host.lower(), int(port)))
            if target is not None:
                host, port = target
        return await resolve(host, port, *args, **kwargs)

    loop.getaddrinfo = getaddrinfo  # type: ignore[method-assign]
    # uvloop resolves inside create_connection (not through loop.getaddrinfo): map the address there too.
    connect = loop.create_connection

    async def create_connection(factory: Any, host: Any = None, port: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and port is not None:
            host, port = mapping.get((host.lower(), int(port)), (host, port))
        return await connect(factory, host, port, *args, **kwargs)

    loop.create_connection = create_connection  # type: ignore[method-assign,assignment]


def event_loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The proxy's event loop: asyncio's; ``uvloop`` (``LLMTAP_EVENT_LOOP=uvloop``) runs mitmproxy on uvloop
    instead (when installed; not a dependency: see docs/performance.md for what it measured)."""
    if name.lower() != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


class _StartupErrorsToStartupError(logging.Filter):
    """Until the proxy runs, mitmproxy's errors are not printed: :func:`serve` turns them into one
    :class:`~llmtap.startup.StartupError` line (mitmproxy's own hint names a ``--mode`` flag
    llmtap does not have). Its ErrorCheck addon still sees them (this filters our handlers only)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("mitmproxy") and record.levelno >= logging.ERROR)


def _startup_error(settings: ProxySettings, errors: list[logging.LogRecord]) -> StartupError:
    host, port = settings.listen
    first = (errors[0].getMessage() if errors else "unknown error").splitlines()[0]
    if "address already in use" in first.lower():
        return StartupError(
            f"--listen {host}:{port}: the address is already in use (another llmtap, or another proxy): "
            "stop it or pick a free port with --listen HOST:PORT"
        )
    return StartupError(f"--listen {host}:{port}: the proxy could not start: {first}")


def listen_on(sock: socket.socket) -> None:
    """Make this process's regular- or transparent-mode proxy accept on ``sock`` (bound and listening
    already, shared with the other workers) instead of binding the port itself. In transparent mode
    mitmproxy reads each accepted connection's original destination from the kernel
    (``SO_ORIGINAL_DST``, a property of that connection), so it holds in whichever worker accepts it."""
    from mitmproxy.proxy.mode_servers import RegularInstance, TransparentInstance

    async def listen(self: Any, host: str, port: int) -> list[Any]:
        return [await asyncio.start_server(self.handle_stream, sock=sock)]

    RegularInstance.listen = listen  # type: ignore[method-assign]
    TransparentInstance.listen = listen  # type: ignore[method-assign]


async def serve(
    settings: ProxySettings,
    addon: Any,
    on_running: Callable[[], None] | None = None,
    *,
    listener: socket.socket | None = None,
    on_stop: Callable[[Callable[[], None]], None] | None = None,
) -> None:
    """Run mitmproxy with llmtap's addon until SIGTERM/SIGINT, then drain (:func:`drain`). ``listener``: a
    listening socket to accept on (a worker's, shared); ``on_stop`` receives a function that cuts the
    proxy at once (the worker calls it when its supervisor is gone)."""
    raise_nofile()
    if listener is not None:
        listen_on(listener)
    addons = proxy_addons(bool(settings.proxy_auth))  # first: keeps mitmproxy's unused addons unimported
    from mitmproxy.log import MitmLogHandler
    from mitmproxy.master import Master
    from mitmproxy.options import Options

    opts = Options(confdir=str(settings.confdir))
    master = Master(opts, with_termlog=False)
    lean_addon_manager(master)
    master.addons.add(*addons)
    update: dict[str, Any] = {
        "listen_host": settings.listen[0],
        "listen_port": settings.listen[1],
        "mode": [settings.mode],
        "allow_hosts": settings.allow_hosts,
        "tcp_timeout": TCP_TIMEOUT_S,
        "connection_strategy": "lazy",
        "http3": False,
    }
    if settings.upstream_bundle is not None:
        update["ssl_verify_upstream_trusted_ca"] = str(settings.upstream_bundle)
    if settings.proxy_auth:
        update["proxyauth"] = settings.proxy_auth
    opts.update(**update)
    from .limits import ConnectionLimits
    from .wsrelay import WebSocketLimits

    settings.limits.connect_to = settings.connect_to
    settings.limits.listen = settings.listen
    master.addons.add(ConnectionLimits(settings.limits), WebSocketLimits(settings.ws), addon)
    loop = asyncio.get_running_loop()
    if settings.connect_to:
        install_connect_to(loop, settings.connect_to)
    stop = Stop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.request)
    if on_stop is not None:
        on_stop(stop.cut)
    redirector = None
    if settings.mode.startswith("local"):
        from .redirector import watch

        def redirector_gone(why: str) -> None:
            loop.call_soon_threadsafe(stop.cut)  # logged from mitmproxy_rs' threads

        redirector = watch(redirector_gone)

    quiet = _StartupErrorsToStartupError()
    ours = [h for h in logging.getLogger().handlers if not isinstance(h, MitmLogHandler)]
    for h in ours:
        h.addFilter(quiet)

    async def announce() -> None:
        while addon.running_since is None:
            await asyncio.sleep(0.05)
        loopnoise.install(loop)  # in front of the handler mitmproxy's Master.run has just put in place
        for h in ours:
            h.removeFilter(quiet)
        if on_running is not None:
            on_running()

    announcing = asyncio.create_task(announce())
    draining = asyncio.create_task(drain(master, addon, stop, settings.drain_timeout))
    try:
        await master.run()
        if redirector is not None and redirector.reason:
            raise StartupError(redirector.reason)
    except SystemExit:  # mitmproxy's ErrorCheck: an error was logged while starting
        ec = master.addons.get("errorcheck")
        raise _startup_error(settings, list(ec.logger.has_errored) if ec else []) from None
    finally:
        announcing.cancel()
        draining.cancel()
        for h in ours:
            h.removeFilter(quiet)
        root = logging.getLogger()
        for h in list(root.handlers):  # mitmproxy's handlers post to this loop, which is about to close
            if isinstance(h, MitmLogHandler):
                root.removeHandler(h)
