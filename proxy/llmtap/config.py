"""The configuration of a llmtap process, built once from its flags and its environment.

- :class:`RunConfig` is ``llmtap run``. Each field declared with :func:`~llmtap.options.option` is a
  flag: the declaration holds its default (the value the sidecar uses, written once), its help and
  how its text reads (:mod:`llmtap.options`). :mod:`llmtap.cli.parser` derives the flag, its help and its
  ``LLMTAP_<FLAG>`` environment variable from it, and :meth:`RunConfig.from_flags` turns what
  was typed (or set in the environment) into values, with one-line errors naming the flag.
- :class:`Environment` holds every other variable llmtap honours: the ``OTEL_*`` variables it
  reads itself (the OTel SDK reads its own) and the test-only knobs (fault injection, the
  cache TTL, admin query limits, the event loop, the mock's defaults). It is read once
  (:meth:`Environment.read`, in :func:`llmtap.cli.main`); no other module reads ``os.environ``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .durations import parse_duration
from .errors import UsageError
from .options import (
    Address,
    ProxyMode,
    address,
    connect_to,
    duration,
    flag_value,
    flags,
    intercept_host,
    items,
    option,
    optional_path,
    proxy_mode,
    show_address,
    show_duration,
    show_path,
    whole,
)
from .store.readonly import QueryLimits

# -- the environment --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Otlp:
    """The ``OTEL_EXPORTER_OTLP_*`` variables llmtap reads itself (the exporter reads the rest; the base URL,
    ``OTEL_EXPORTER_OTLP_ENDPOINT``, is ``--otlp-endpoint``'s fallback: :class:`RunConfig`)."""

    traces_endpoint: str = ""  # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: wins over a base URL, as the spec says
    protocol: str = "http/protobuf"  # OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL


@dataclass(frozen=True, slots=True)
class MockDefaults:
    """``llmtap mock-provider``'s defaults for clients that cannot send its ``x-mock-*`` headers."""

    replay_dir: str = ""  # LLMTAP_MOCK_REPLAY_DIR: the recordings x-mock-replay serves
    delay_ms: float | None = None  # LLMTAP_MOCK_DELAY_MS: the gap between stream events
    events: int | None = None  # LLMTAP_MOCK_EVENTS: content events of a stream


@dataclass(frozen=True)
class Environment:
    """The process environment, read once: its variables (for flag defaults and the children a
    command starts) and, typed, the ones llmtap honours besides ``LLMTAP_<FLAG>``."""

    variables: Mapping[str, str] = field(default_factory=dict)
    otlp: Otlp = field(default_factory=Otlp)
    resource_attributes: dict[str, str] = field(default_factory=dict)  # OTEL_RESOURCE_ATTRIBUTES
    # Test-only knobs (each documented where it is used).
    faults: frozenset[str] = frozenset()  # LLMTAP_FAULT_INJECT=adapter,sink,tee_delay (llmtap.testing.faults)
    fault_tee_delay_s: float = 0.002  # LLMTAP_FAULT_TEE_DELAY_MS
    cache_ttl_s: float | None = None  # LLMTAP_TEST_CACHE_TTL: stands for the providers' 5-minute cache TTL
    event_loop: str = ""  # LLMTAP_EVENT_LOOP=uvloop: the proxy's loop (docs/performance.md)
    query_limits: QueryLimits = field(default_factory=QueryLimits)  # LLMTAP_ADMIN_QUERY_* (docs/security.md)
    mock: MockDefaults = field(default_factory=MockDefaults)

    @classmethod
    def read(cls) -> Environment:
        """This process's environment (the one place that reads ``os.environ``)."""
        return cls.of(dict(os.environ))

    @classmethod
    def of(cls, variables: Mapping[str, str]) -> Environment:
        """The environment ``variables`` describe (tests build one from a dict). A test knob that does
        not read is left at its default: a stray variable never stops a command from starting."""
        v = dict(variables)
        limits = QueryLimits()
        delay, events = _number(v, "LLMTAP_MOCK_DELAY_MS", float), _number(v, "LLMTAP_MOCK_EVENTS", int)
        return cls(
            variables=v,
            otlp=Otlp(
                traces_endpoint=v.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""),
                protocol=(v.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or v.get("OTEL_EXPORTER_OTLP_PROTOCOL"))
                or "http/protobuf",
            ),
            resource_attributes=_pairs(v.get("OTEL_RESOURCE_ATTRIBUTES", "")),
            faults=frozenset(items(v.get("LLMTAP_FAULT_INJECT", ""))),
            fault_tee_delay_s=_number(v, "LLMTAP_FAULT_TEE_DELAY_MS", float, 2.0) / 1000.0,
            cache_ttl_s=_number(v, "LLMTAP_TEST_CACHE_TTL", parse_duration),
            event_loop=v.get("LLMTAP_EVENT_LOOP", "").lower(),
            query_limits=QueryLimits(
                _number(v, "LLMTAP_ADMIN_QUERY_TIMEOUT_S", int, limits.max_execution_time),
                _number(v, "LLMTAP_ADMIN_QUERY_MAX_MEMORY", int, limits.max_memory_usage),
                _number(v, "LLMTAP_ADMIN_QUERY_MAX_ROWS", int, limits.max_result_rows),
                _number(v, "LLMTAP_ADMIN_QUERY_MAX_BYTES", int, limits.max_result_bytes),
            ),
            mock=MockDefaults(v.get("LLMTAP_MOCK_REPLAY_DIR", ""), delay, events),
        )

    def get(self, name: str, default: Any = None) -> Any:
        return self.variables.get(name, default)


def _number(v: Mapping[str, str], name: str, kind: Callable[[str], Any], default: Any = None) -> Any:
    """Variable ``name`` read by ``kind`` (``int``, ``float``, a duration); ``default`` when unset, empty or bad."""
    try:
        return kind(v[name]) if v.get(name) else default
    except ValueError:
        return default


def _pairs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        k, sep, v = part.partition("=")
        if sep and k.strip():
            out[k.strip()] = v.strip()
    return out


def library_environment(cfg: RunConfig) -> None:
    """What libraries that read the environment themselves need: tiktoken's cache (``TIKTOKEN_CACHE_DIR``),
    the data dir's unless the user set one (:attr:`RunConfig.tiktoken_cache`: the estimator seeds that one with
    the shipped encodings). Called once, when the sidecar starts."""
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cfg.tiktoken_cache)


# -- llmtap run ---------------------------------------------------------------------------------------

DEFAULT_DATA_DIR = Path("llmtap-data")


def data_dir(text: str) -> Path:
    return Path(text) if text else DEFAULT_DATA_DIR


@dataclass
class RunConfig:
    """Everything ``llmtap run`` is configured with. Each :func:`option` field is a flag (in ``--help``
    order); ``env`` is the rest of the environment. Built by :meth:`from_flags`."""

    listen: Address = option(("127.0.0.1", 8080), "proxy address HOST:PORT", parse=address, show=show_address)
    mode: ProxyMode = option(
        ProxyMode(),
        "how clients reach the proxy: regular (HTTPS_PROXY, base URL), transparent (connections redirected by "
        "`llmtap netfilter apply`), local[:PROCESS] (mitmproxy's eBPF redirector, where the kernel loads it)",
        parse=proxy_mode,
        metavar="MODE",
    )
    admin: Address = option(("127.0.0.1", 9464), "admin HTTP address HOST:PORT", parse=address, show=show_address)
    data_dir: Path = option(DEFAULT_DATA_DIR, "CA, embedded store, spool", parse=data_dir, show=show_path)
    store: str = option(
        "",
        "chdb://PATH or clickhouse://user:pass@host:8123/db (clickhouses:// for TLS); none: OTLP export only",
        default_text="chdb://<data-dir>/store",
    )
    read_store: str = option(
        "", "clickhouse://reader:pass@host:8123/db: the credentials every read uses (a user with SELECT only)"
    )
    intercept: list[str] = option(
        factory=list,
        help="also intercept this host (repeatable; env: comma-separated)",
        parse=intercept_host,
        repeat=True,
        metavar="HOST[:PORT]",
    )
    upstream_ca: Path | None = option(None, "extra CA bundle for upstream TLS", parse=optional_path)
    otlp_endpoint: str = option("", "OTLP endpoint for spans", fallback="OTEL_EXPORTER_OTLP_ENDPOINT")
    capture_content: bool = option(False, "opt-in prompt/response capture (redacted, size-capped)", switch=True)
    service: str = option(
        "",
        "service name for calls without x-llmtap-service (default $OTEL_SERVICE_NAME)",
        fallback="OTEL_SERVICE_NAME",
    )
    connect_to: dict[Address, Address] = option(
        factory=dict,
        help="connect to ADDR:PORT for HOST:PORT (TLS name unchanged), as curl --connect-to",
        parse=connect_to,
        repeat=True,
        collect=dict,
        metavar="HOST:PORT:ADDR:PORT",
    )
    proxy_auth: str = option(
        "",
        "USER:PASS or @HTPASSWD_FILE required from clients (prefer LLMTAP_PROXY_AUTH or --proxy-auth-file: "
        "arguments are visible in ps)",
    )
    proxy_auth_file: Path | None = option(
        None, "read USER:PASS for --proxy-auth from this file (e.g. a container secret)", parse=optional_path
    )
    allow_open_proxy: bool = option(False, "allow a non-loopback --listen without --proxy-auth", switch=True)
    admin_token: str = option(
        "",
        "bearer token for the admin API (default: generated in <data-dir>/admin-token); prefer the env "
        "LLMTAP_ADMIN_TOKEN or --admin-token-file: arguments are visible in ps",
    )
    admin_allowed_hosts: list[str] = option(
        factory=list,
        help="a host name the admin API may be reached by besides loopback names and IP addresses (repeatable)",
        flag="--admin-allowed-host",
        repeat=True,
        metavar="NAME",
    )
    admin_token_file: Path | None = option(
        None, "read the admin bearer token from this file (e.g. a container secret)", parse=optional_path
    )
    spool_max_mb: int = option(
        1024, "bound of the on-disk spool (records waiting for the store), in MiB", parse=whole(1, " MiB")
    )
    max_client_connections: int = option(
        4096,
        "client connections the proxy holds at once (the longest idle is closed for a new one)",
        parse=whole(1),
    )
    client_header_timeout: float = option(
        30.0, "time a new client connection has to send its first request", parse=duration(), show=show_duration
    )
    drain_timeout: float = option(
        30.0,
        "on SIGTERM/SIGINT, time in-flight calls get to finish before they are cut",
        parse=duration(),
        show=show_duration,
    )
    ws_max_message_mb: int = option(
        8,
        "MiB of one WebSocket message parsed (after permessage-deflate); a longer one is relayed untouched, not parsed",
        parse=whole(1, " MiB"),
    )
    ws_max_inflate_mb: int = option(
        64,
        "MiB of one compressed WebSocket message inflated to keep reading its socket; past it the socket is relayed "
        "unread and its calls in flight are booked with the reason",
        parse=whole(1, " MiB"),
    )
    prices: Path | None = option(None, "price file (JSON/TOML) overriding genai-prices", parse=optional_path)
    content_retention_days: int = option(7, "days captured content is kept (llm_content TTL)", parse=whole(0))
    traces_retention_days: int = option(0, "days otel_traces rows are kept, 0 = forever", parse=whole(0))
    alert_webhook: str = option(
        "", "POST alerts (the baseline rules, evaluated here) to this URL as Slack-compatible JSON"
    )
    alert_interval_s: float = option(
        60.0,
        "how often the alert rules are evaluated",
        flag="--alert-interval",
        parse=duration(1.0),
        show=show_duration,
    )
    grafana_url: str = option("", "Grafana's base URL: the viewer's call page links to its trace view there")
    calls_retention_days: int = option(0, "days llm_calls rows are kept, 0 = forever", parse=whole(0))
    workers: int = option(
        0, "proxy processes sharing the listening port (0: one per usable core, at most 4)", parse=whole(0)
    )
    env: Environment = field(default_factory=Environment)
    log_level: str = "info"  # the command's logging flags (every command has them), for the proxy workers
    log_format: str = "text"

    @classmethod
    def from_flags(cls, args: argparse.Namespace, env: Environment) -> RunConfig:
        """The configuration the command line and the environment give; secrets read from their files.
        Raises :class:`~llmtap.errors.UsageError` (one line naming the flag) on a value that does not read."""
        values = {f.name: flag_value(f, getattr(args, f.name, None), env.variables) for f in flags(cls)}
        data_dir: Path = values["data_dir"]
        if not values["store"]:
            from .store import default_store_url

            values["store"] = default_store_url(data_dir)
        values["data_dir"] = data_dir.resolve()
        values["proxy_auth"] = _secret(values["proxy_auth"], values["proxy_auth_file"], "--proxy-auth-file")
        values["admin_token"] = _secret(values["admin_token"], values["admin_token_file"], "--admin-token-file")
        log_level, log_format = str(getattr(args, "log_level", "info")), str(getattr(args, "log_format", "text"))
        return cls(**values, env=env, log_level=log_level, log_format=log_format)

    @property
    def tiktoken_cache(self) -> Path:
        """tiktoken's cache: ``TIKTOKEN_CACHE_DIR`` when the user set one, else ``<data-dir>/tiktoken``; seeded
        with the encodings the package ships (:mod:`llmtap.capture.estimate`)."""
        return Path(self.env.variables.get("TIKTOKEN_CACHE_DIR") or self.data_dir / "tiktoken")


def _secret(value: str, path: Path | None, flag: str) -> str:
    if path is None:
        return value
    try:
        return path.read_text().strip()
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot read it ({e.strerror})") from None


__all__ = ["DEFAULT_DATA_DIR", "Environment", "MockDefaults", "Otlp", "RunConfig", "library_environment"]
