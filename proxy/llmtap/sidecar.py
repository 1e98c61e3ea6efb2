"""``llmtap run``: assembles the proxy, the pipeline, the store and the admin server."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__, faults
from .addon import AddonConfig, LlmTapAddon
from .admin import AdminServer, AdminState
from .attribution import Fingerprinter
from .ca import ca_dir, client_bundle, ensure_ca, upstream_bundle
from .estimate import TokenEstimator
from .metrics import Metrics
from .otel import otel_traces_row
from .pipeline import Pipeline, Sink
from .pricing import Pricer, load_price_file
from .providers import allow_host_patterns
from .record import CallRecord
from .store import rowbinary
from .store.open import open_backend
from .store.spool import Spool, json_line_converter
from .store.writer import StoreWriter

log = logging.getLogger("llmtap")
calls_log = logging.getLogger("llmtap.calls")

# Reasoning models can stay silent for many minutes: keep idle connections for 35 min.
TCP_TIMEOUT_S = 35 * 60


@dataclass
class RunConfig:
    listen: tuple[str, int]
    admin: tuple[str, int]
    data_dir: Path
    store: str
    intercept: list[str] = field(default_factory=list)
    upstream_ca: Path | None = None
    connect_to: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    service: str = ""
    proxy_auth: str = ""
    allow_open_proxy: bool = False
    admin_token: str = ""
    otlp_endpoint: str = ""
    capture_content: bool = False
    prices: Path | None = None
    content_retention_days: int = 7
    traces_retention_days: int = 0
    calls_retention_days: int = 0
    spool_max_mb: int = 1024


class ConfigError(ValueError):
    pass


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(cfg: RunConfig) -> None:
    if not is_loopback(cfg.listen[0]) and not (cfg.proxy_auth or cfg.allow_open_proxy):
        raise ConfigError(
            f"refusing to listen on {cfg.listen[0]}: a non-loopback proxy needs --proxy-auth USER:PASS "
            "(or --allow-open-proxy if the network in front of it is trusted)"
        )
    if not is_loopback(cfg.admin[0]) and not cfg.admin_token:
        raise ConfigError(f"refusing to expose the admin API on {cfg.admin[0]} without --admin-token")


def resource_attributes() -> dict[str, str]:
    out: dict[str, str] = {}
    for part in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        k, sep, v = part.partition("=")
        if sep and k.strip():
            out[k.strip()] = v.strip()
    return out


def log_call(r: CallRecord) -> None:
    """One structured line per call (logger ``llmtap.calls``); JSON with --log-format json."""
    if calls_log.isEnabledFor(logging.INFO):
        fields = {k: v for k, v in r.to_dict().items() if k != "extra" and v not in (None, "")}
        calls_log.info("llm call", extra={"llm_call": fields})


def run(cfg: RunConfig) -> int:
    check_exposure(cfg)
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(cfg.data_dir, 0o700)
    ensure_ca(cfg.data_dir)
    client_bundle(cfg.data_dir)  # what `llmtap env` points clients at
    upstream = upstream_bundle(cfg.data_dir, cfg.upstream_ca) if cfg.upstream_ca else None

    pricer = Pricer(load_price_file(cfg.prices) if cfg.prices else [])
    metrics = Metrics()
    retention = {
        "llm_content": cfg.content_retention_days,
        "otel_traces": cfg.traces_retention_days,
        "llm_calls": cfg.calls_retention_days,
    }
    backend = open_backend(cfg.store, retention)
    writer: StoreWriter | None = None
    resource = resource_attributes()
    sinks: list[Sink] = [log_call]
    if backend is not None:

        def dropped(reason: str, n: int) -> None:
            metrics.dropped.labels(reason).inc(n)

        spool = Spool(
            cfg.data_dir / "spool",
            max_bytes=cfg.spool_max_mb << 20,
            on_drop=dropped,
            legacy=json_line_converter(rowbinary.encode),
        )
        store_writer = writer = StoreWriter(backend, spool, quarantine_dir=cfg.data_dir / "quarantine", on_drop=dropped)
        sinks.insert(0, lambda r: store_writer.submit(otel_traces_row(r, resource)))
    if faults.enabled("sink"):
        sinks.insert(0, faults.failing_sink)
    span_sink = None
    if cfg.otlp_endpoint or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        from .spans import SpanSink, otlp_exporter

        span_sink = SpanSink(otlp_exporter(cfg.otlp_endpoint or None), resource)
        sinks.append(span_sink)
    elif backend is None:
        raise ConfigError("--store none needs an OTLP endpoint (--otlp-endpoint): records would go nowhere")
    estimator = TokenEstimator(cfg.data_dir / "tiktoken")
    pipeline = Pipeline(metrics, estimator, sinks, pricer=pricer, capture_content=cfg.capture_content)
    addon = LlmTapAddon(
        AddonConfig(service=cfg.service, intercept=cfg.intercept, listen=cfg.listen),
        pipeline,
        Fingerprinter.from_data_dir(cfg.data_dir),
    )

    def health() -> dict[str, Any]:
        h: dict[str, Any] = {
            "status": "ok" if addon.running_since is not None else "starting",
            "version": __version__,
            "pending": pipeline.pending(),
            "inflight_calls": addon.inflight,
            "event_loop_tasks": addon.loop_tasks(),
        }
        if writer is not None:
            queued = writer.queued()
            metrics.store_queue.set(queued)
            metrics.spool_bytes.set(writer.spool.total_bytes())
            h.update(store_queue=queued, store_ok=writer.failing_since is None, records_written=writer.written)
        return h

    def query(sql: str, fmt: str) -> bytes:
        if backend is None:
            raise RuntimeError("this sidecar runs with --store none: query the store the collector writes to")
        if writer is not None:
            writer.flush(2.0)  # reads see every call finished so far, not only what the writer sent
        return backend.query(sql, fmt)

    admin = AdminServer(cfg.admin[0], cfg.admin[1], AdminState(metrics, query, health, cfg.admin_token))
    admin.start()
    try:
        asyncio.run(_serve(cfg, addon, upstream))
    finally:
        log.info("shutting down: flushing records")
        pipeline.close()
        if span_sink is not None:
            span_sink.close()
        if writer is not None:
            writer.flush(15.0)
            writer.close()
        admin.close()
        if backend is not None:
            backend.close()
    written = writer.written if writer is not None else 0
    print(f"llmtap: stopped ({written} records written to the store)", file=sys.stderr)
    return 0


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


async def _serve(cfg: RunConfig, addon: LlmTapAddon, upstream: Path | None) -> None:
    from .mitm import proxy_addons

    addons = proxy_addons(bool(cfg.proxy_auth))  # first: keeps mitmproxy's unused addons unimported
    from mitmproxy.master import Master
    from mitmproxy.options import Options

    opts = Options(confdir=str(ca_dir(cfg.data_dir)))
    master = Master(opts, with_termlog=False)
    master.addons.add(*addons)
    update: dict[str, Any] = {
        "listen_host": cfg.listen[0],
        "listen_port": cfg.listen[1],
        "mode": ["regular"],
        "allow_hosts": allow_host_patterns(cfg.intercept),
        "tcp_timeout": TCP_TIMEOUT_S,
        "connection_strategy": "lazy",
        "http3": False,
    }
    if upstream is not None:
        update["ssl_verify_upstream_trusted_ca"] = str(upstream)
    if cfg.proxy_auth:
        update["proxyauth"] = cfg.proxy_auth
    opts.update(**update)
    master.addons.add(addon)
    loop = asyncio.get_running_loop()
    if cfg.connect_to:
        install_connect_to(loop, cfg.connect_to)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, master.shutdown)

    async def announce() -> None:
        while addon.running_since is None:
            await asyncio.sleep(0.05)
        print(
            f"llmtap {__version__}: proxy on {cfg.listen[0]}:{cfg.listen[1]}, admin on "
            f"http://{cfg.admin[0]}:{cfg.admin[1]}, data in {cfg.data_dir}",
            file=sys.stderr,
            flush=True,
        )

    task = asyncio.create_task(announce())
    await master.run()
    task.cancel()
