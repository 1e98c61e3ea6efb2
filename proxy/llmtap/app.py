"""``llmtap run``: the composition root. Config → build every part → start → close, in one order.

Build order follows the data flow backwards (stores and sinks first, the proxy last), and
shutdown runs it forwards: the proxy stops taking traffic, the pipeline drains and closes its
sinks (store writer, spans, metrics, logs), then the admin server and the store close.
Test tooling (fault injection) is wired here and only here, when asked for.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .admin import AdminAuth, AdminServer, AdminState, Reads, install_token
from .capture import TokenEstimator
from .capture.batch import BatchExpander
from .capture.recorder import AdapterFactory, Recorder
from .config import Environment, RunConfig
from .errors import ConfigError, StartupError
from .intercept.attribution import Fingerprinter
from .intercept.ca import ca_dir, client_bundle, ensure_ca, upstream_bundle
from .intercept.routing import allow_host_patterns
from .intercept.worker import WorkerSettings
from .pipeline import Enricher, Expander, Pipeline, RecordSink
from .startup import DataDirLock, bind_listener, check_port, prepare_data_dir, store_id, store_identity
from .store import Backend, StoreSink, open_backend, rowbinary
from .store.engine import INGEST_INTERVAL_S, INGEST_ROWS, EngineClient
from .store.spool import Spool, json_line_converter
from .store.url import check_store_url
from .store.writer import StoreWriter
from .telemetry import (
    CacheMissAnalyzer,
    ContentCapture,
    LogSink,
    Metrics,
    MetricsSink,
    Pricer,
    RetryDetector,
    load_price_file,
)
from .workers import Workers, default_workers

log = logging.getLogger("llmtap")
READ_FLUSH_S = 30.0  # a read first waits for what the writer holds (an engine started on demand takes seconds)


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def real_credentials(spec: str) -> bool:
    """``USER:PASS`` with both parts, an htpasswd file (``@PATH``) or LDAP: not ``any`` (which takes any)."""
    spec = spec.strip()
    if spec.startswith("@") and len(spec) > 1:
        return True
    if spec.startswith(("ldap:", "ldaps:")):
        return True
    user, sep, password = spec.partition(":")
    return bool(sep and user and password) and spec != "any"


def check_alerts(cfg: RunConfig) -> None:
    if not cfg.alert_webhook:
        return
    from .alerts import WebhookError, check_webhook_url

    try:
        check_webhook_url(cfg.alert_webhook)
    except WebhookError as e:
        raise ConfigError(str(e)) from None
    if cfg.store == "none":
        raise ConfigError("--alert-webhook evaluates the rules on the store: it needs a store (not --store none)")


def check_exposure(cfg: RunConfig) -> None:
    if not is_loopback(cfg.listen[0]) and not (real_credentials(cfg.proxy_auth) or cfg.allow_open_proxy):
        raise ConfigError(
            f"refusing to listen on {cfg.listen[0]}: a non-loopback proxy needs real credentials, "
            '--proxy-auth USER:PASS or --proxy-auth @HTPASSWD_FILE ("any" accepts anyone), '
            "or --allow-open-proxy if the network in front of it is trusted"
        )
    if not is_loopback(cfg.admin[0]) and not cfg.admin_token:
        raise ConfigError(f"refusing to expose the admin API on {cfg.admin[0]} without --admin-token")


@dataclass
class Sidecar:
    """Every part of a running sidecar, built by :func:`build`."""

    cfg: RunConfig
    metrics: Metrics
    backend: Backend | None
    writer: StoreWriter | None
    pipeline: Pipeline
    recorder: Recorder
    upstream: Path | None
    lock: DataDirLock | None = None
    listener: socket.socket | None = None
    workers: Workers | None = None

    def health(self) -> dict[str, Any]:
        w = self.workers.health() if self.workers is not None else {}
        h: dict[str, Any] = {
            "status": "draining" if w.get("draining") else "ok" if w.get("running") else "starting",
            "version": __version__,
            "store_id": store_id(self.cfg.store),
            "pending": self.pipeline.pending(),
            "inflight_calls": w.get("inflight_calls", 0),
            "open_websockets": w.get("open_websockets", 0),
            "event_loop_tasks": w.get("event_loop_tasks"),
            "workers": w.get("workers", 0),
            "capture_mode": self.cfg.mode.kind,
        }
        if self.writer is not None:
            queued = self.writer.queued()
            h.update(store_queue=queued, store_ok=self.writer.store_ok(), records_written=self.writer.written)
            if not self.writer.ok():
                h["store_error"] = self.writer.last_error
        return h

    def reads(self) -> Reads | None:
        """The guarded read path of the store (None with ``--store none``)."""
        if self.backend is None:
            return None
        writer = self.writer

        def flush() -> None:  # reads see every call finished so far: the workers' last handoffs, the writer's
            if self.workers is not None:
                self.workers.settle()
            if writer is not None:
                writer.flush(READ_FLUSH_S)

        return Reads(self.backend, flush)

    def admin_state(self) -> AdminState:
        token = self.cfg.admin_token or install_token(self.cfg.data_dir)
        auth = AdminAuth(token, explicit=bool(self.cfg.admin_token), allowed_hosts=tuple(self.cfg.admin_allowed_hosts))
        return AdminState(self.metrics, self.reads(), self.health, auth, self.cfg.grafana_url)


def _faults(env: Environment) -> tuple[AdapterFactory | None, list[RecordSink]]:
    """``LLMTAP_FAULT_INJECT``: the chaos tests' faults, from the testing wing, only when asked for."""
    if not env.faults:
        return None, []
    from .testing import faults

    return faults.adapter_factory(env.faults, env.fault_tee_delay_s), faults.sinks(env.faults)


def _analysis(cfg: RunConfig, metrics: Metrics, prices: list[Any]) -> tuple[list[Enricher], list[Expander]]:
    """What the worker adds to each record: a batch download's items, the price, retries, cache misses,
    content. ``LLMTAP_TEST_CACHE_TTL`` (tests only: a duration) stands for the providers' 5-minute cache
    TTL (the 1-hour one scales with it), so a test can let a cache expire without waiting 5 minutes."""
    pricer = Pricer(prices, on_lookup=lambda result: metrics.price_lookups.labels(result).inc())
    pricer.warm()
    cache = CacheMissAnalyzer(pricer.cache_read_saving)
    if cfg.env.cache_ttl_s is not None:
        cache.ttl_5m_s = cfg.env.cache_ttl_s
        cache.ttl_1h_s = cache.ttl_5m_s * 12
    enrichers: list[Enricher] = [pricer, RetryDetector(), cache]
    if cfg.capture_content:
        enrichers.append(ContentCapture())
    return enrichers, [BatchExpander()]


def check_flags(cfg: RunConfig) -> None:
    """The store URLs, the files the flags name, and a sidecar with somewhere to send its records."""
    check_store_url(cfg.store, cfg.read_store)
    if cfg.upstream_ca and not Path(cfg.upstream_ca).is_file():
        raise ConfigError(f"--upstream-ca: no such file: {cfg.upstream_ca}")
    if cfg.store.strip().lower() == "none" and not (cfg.otlp_endpoint or cfg.env.otlp.traces_endpoint):
        raise ConfigError("--store none needs an OTLP endpoint (--otlp-endpoint): records would go nowhere")


def build(cfg: RunConfig) -> Sidecar:
    """Every flag, URL and file the flags name is checked before a port is bound or the data dir locked: a
    bad value is what the sidecar reports, not a port another process holds."""
    check_exposure(cfg)
    check_alerts(cfg)
    check_flags(cfg)
    prices = load_price_file(cfg.prices) if cfg.prices else []
    prepare_data_dir(cfg.data_dir)
    lock = DataDirLock(cfg.data_dir)
    lock.acquire(cfg.listen, cfg.admin, cfg.store)  # one sidecar per data dir, named for the read commands
    listener: socket.socket | None = None
    try:
        listener = bind_listener("--listen", *cfg.listen)  # the workers share it
        check_port("--admin", *cfg.admin)
        sc = _build(cfg, prices)
    except BaseException:
        if listener is not None:
            listener.close()
        lock.release()
        raise
    sc.lock, sc.listener = lock, listener
    return sc


def _build(cfg: RunConfig, prices: list[Any]) -> Sidecar:
    ensure_ca(cfg.data_dir)
    client_bundle(cfg.data_dir)  # what `llmtap env` points clients at
    upstream = upstream_bundle(cfg.data_dir, cfg.upstream_ca) if cfg.upstream_ca else None

    metrics = Metrics()
    retention = {
        "llm_content": cfg.content_retention_days,
        "otel_traces": cfg.traces_retention_days,
        "llm_calls": cfg.calls_retention_days,
    }
    backend = open_backend(cfg.store, retention, cfg.read_store, limits=cfg.env.query_limits, engine_process=True)
    try:
        return _assemble(cfg, metrics, backend, prices, upstream)
    except BaseException:
        if backend is not None:
            backend.close()
        raise


def _assemble(
    cfg: RunConfig, metrics: Metrics, backend: Backend | None, prices: list[Any], upstream: Path | None
) -> Sidecar:
    resource = dict(cfg.env.resource_attributes)
    make_adapter, fault_sinks = _faults(cfg.env)
    sinks: list[RecordSink] = [*fault_sinks]
    writer: StoreWriter | None = None
    if backend is not None:

        def dropped(reason: str, n: int) -> None:
            metrics.dropped.labels(reason).inc(n)

        spool = Spool(
            cfg.data_dir / "spool",
            max_bytes=cfg.spool_max_mb << 20,
            on_drop=dropped,
            legacy=json_line_converter(rowbinary.encode),
        )
        lazy = isinstance(backend, EngineClient)  # the engine runs when there is something to ingest or read
        writer = StoreWriter(
            backend,
            spool,
            batch_size=INGEST_ROWS if lazy else 10_000,
            linger=INGEST_INTERVAL_S if lazy else 1.0,
            quarantine_dir=cfg.data_dir / "quarantine",
            on_drop=dropped,
            on_error=lambda reason: metrics.store_errors.labels(reason).inc(),
            where=store_identity(cfg.store),
        )
        sinks.append(StoreSink(writer, resource))
        # Read when scraped: /metrics tells the truth with nothing polling /healthz (the alert rules use them).
        metrics.store_queue.set_function(writer.queued)
        metrics.spool_bytes.set_function(writer.spool.total_bytes)
    sinks += [MetricsSink(metrics), LogSink()]
    if cfg.otlp_endpoint or cfg.env.otlp.traces_endpoint:
        from .telemetry.spans import SpanSink, otlp_exporter

        sinks.append(SpanSink(otlp_exporter(cfg.otlp_endpoint or None, cfg.env.otlp), resource))
    enrichers, expanders = _analysis(cfg, metrics, prices)
    pipeline = Pipeline(metrics, TokenEstimator(cfg.tiktoken_cache), sinks, enrichers, expanders=expanders)

    def parse_error(api: str, e: BaseException) -> None:
        metrics.parse_errors.labels(api).inc()
        log.warning("side parser failed for a %s call (traffic unaffected): %s", api, e)

    fingerprinter = Fingerprinter.from_data_dir(cfg.data_dir)
    recorder = Recorder(
        pipeline.process, fingerprinter, cfg.service, make_adapter, parse_error, cfg.ws_max_message_mb << 20,
        capture_mode=cfg.mode.kind,
    )  # fmt: skip
    return Sidecar(cfg, metrics, backend, writer, pipeline, recorder, upstream)


def mitmproxy_mode(cfg: RunConfig) -> str:
    """``--mode`` as mitmproxy spells it; local mode leaves the sidecar's own processes alone (mitmproxy
    excludes the worker itself; the supervisor's exports and store writes are excluded here)."""
    if cfg.mode.kind != "local":
        return cfg.mode.kind
    return f"local:{','.join(filter(None, (cfg.mode.processes, f'!{os.getpid()}')))}"


def worker_count(cfg: RunConfig) -> int:
    """``--workers``; local mode runs one (mitmproxy starts one redirector per machine, not per process)."""
    return 1 if cfg.mode.kind == "local" else cfg.workers or default_workers()


def worker_settings(cfg: RunConfig, sc: Sidecar, workers: int) -> WorkerSettings:
    return WorkerSettings(
        index=0,
        listen=cfg.listen,
        confdir=str(ca_dir(cfg.data_dir)),
        allow_hosts=allow_host_patterns(cfg.intercept),
        mode=mitmproxy_mode(cfg),
        intercept=cfg.intercept,
        upstream_bundle=str(sc.upstream) if sc.upstream else "",
        proxy_auth=cfg.proxy_auth,
        connect_to=[(h, p, a, ap) for (h, p), (a, ap) in cfg.connect_to.items()],
        drain_timeout=cfg.drain_timeout,
        max_clients=-(-cfg.max_client_connections // workers),  # the cap is the sidecar's: shared out
        header_timeout=cfg.client_header_timeout,
        admin=cfg.admin,
        log_level=cfg.log_level,
        log_format=cfg.log_format,
        event_loop=cfg.env.event_loop,
        ws_max_message=cfg.ws_max_message_mb << 20,
        ws_max_inflate=cfg.ws_max_inflate_mb << 20,
    )


async def supervise(cfg: RunConfig, sc: Sidecar, announce: Callable[[], None]) -> None:
    """Start the proxy workers, record what they hand off until SIGTERM/SIGINT (or a worker that cannot go
    on: local mode's redirector gave up), then drain them."""
    assert sc.listener is not None
    count = worker_count(cfg)
    stop = asyncio.Event()
    fatal: list[str] = []

    def gave_up(why: str) -> None:
        fatal.append(why)
        stop.set()

    workers = Workers(
        worker_settings(cfg, sc, count),
        count,
        sc.listener,
        sc.recorder,
        on_dropped=lambda reason, n: sc.metrics.client_dropped.labels(reason).inc(n),
        on_fatal=gave_up,
    )
    sc.workers = workers
    sc.metrics.client_connections.set_function(lambda: workers.health()["client_connections"])
    loop = asyncio.get_running_loop()
    cutting: list[asyncio.Task[None]] = []

    def signalled() -> None:
        if stop.is_set():
            cutting.append(loop.create_task(workers.stop()))  # a second signal: the workers cut their calls now
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, signalled)
    await workers.start()
    announce()
    await stop.wait()
    log.info("draining the proxy workers")
    sc.listener.close()  # the workers' copies close as they drain: then the port refuses connections
    await workers.stop()
    if fatal:
        raise StartupError(fatal[0])


def run(cfg: RunConfig) -> int:
    sc = build(cfg)
    admin: AdminServer | None = None
    alerts = None
    try:
        try:
            admin = AdminServer(cfg.admin[0], cfg.admin[1], sc.admin_state())
        except OSError as e:
            raise StartupError(
                f"--admin {cfg.admin[0]}:{cfg.admin[1]}: cannot listen ({e.strerror}): pick a free port with --admin"
            ) from None
        admin.start()
        reads = sc.reads()
        if cfg.alert_webhook and reads is not None:
            from .alerts import AlertThread

            alerts = AlertThread(
                lambda sql, fmt: reads.run(sql, fmt), cfg.data_dir, cfg.alert_webhook, cfg.alert_interval_s
            )
            alerts.start()

        def announce() -> None:
            print(
                f"llmtap {__version__}: proxy ({cfg.mode}) on {cfg.listen[0]}:{cfg.listen[1]}, admin on "
                f"http://{cfg.admin[0]}:{cfg.admin[1]}, data in {cfg.data_dir}",
                file=sys.stderr,
                flush=True,
            )

        asyncio.run(supervise(cfg, sc, announce))
    finally:
        if sc.listener is not None:
            sc.listener.close()
        if alerts is not None:
            alerts.close()
        log.info("shutting down: flushing records")
        sc.pipeline.close()
        if admin is not None:
            admin.close()
        if sc.backend is not None:
            sc.backend.close()
        if sc.lock is not None:
            sc.lock.release()
    written = sc.writer.written if sc.writer is not None else 0
    print(f"llmtap: stopped ({written} records written to the store)", file=sys.stderr)
    return 0
