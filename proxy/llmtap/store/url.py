"""Store URLs → backends: ``chdb://PATH`` (embedded, default) or ``clickhouse[s]://...``."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from ..errors import LlmtapError
from .backend import Backend
from .readonly import QueryLimits
from .schema import DEFAULT_DB


class StoreURLError(LlmtapError, ValueError):
    pass


def default_store_url(data_dir: Path) -> str:
    return f"chdb://{data_dir / 'store'}"


def chdb_path(url: str) -> Path:
    rest = url[len("chdb://") :]
    if not rest:
        raise StoreURLError("chdb:// needs a path, e.g. chdb://./llmtap-data/store")
    return Path(rest).expanduser()


def is_store(path: Path) -> bool:
    """Whether ``path`` holds an embedded store (chDB keeps its catalogue in ``metadata/``)."""
    return (path / "metadata").is_dir()


def check_store_url(url: str, read_url: str = "") -> None:
    """What :func:`open_backend` would refuse about the URLs themselves, without opening anything: the sidecar
    checks it before it binds a port, so a bad URL is what it reports (not a port another process holds)."""
    scheme = urlsplit(url).scheme.lower()
    if url.strip().lower() == "none":
        scheme = "none"
    elif scheme == "chdb":
        chdb_path(url)
    elif scheme in ("clickhouse", "clickhouses"):
        from .clickhouse import ClickHouseURLError, parse_url

        try:
            parse_url(url)
            if read_url:
                parse_url(read_url)
        except ClickHouseURLError as e:
            raise StoreURLError(str(e)) from None
    else:
        raise StoreURLError(_UNKNOWN.format(scheme=scheme))
    if read_url and scheme not in ("clickhouse", "clickhouses"):
        raise StoreURLError(_READ_STORE)


_UNKNOWN = "--store: unknown store URL scheme {scheme!r}: use chdb://PATH, clickhouse://user:pass@host:8123/db or none"
_READ_STORE = "--read-store applies to a clickhouse:// store only (the embedded store reads read-only)"


def open_backend(
    url: str,
    retention: dict[str, int] | None = None,
    read_url: str = "",
    *,
    for_reading: bool = False,
    limits: QueryLimits | None = None,
    engine_process: bool = False,
) -> Backend | None:
    """The backend for a store URL; ``none`` means no store (OTLP export only).

    ``read_url`` (``--read-store``) names the credentials of every read path of a ClickHouse
    server store: a user with ``SELECT`` on the llmtap database only (docs/security.md).
    ``for_reading`` (the read commands): never create a store, and a server store is not connected
    as the writer at all. An embedded path that holds none and a server database without llmtap's
    tables are refused with a :class:`StoreURLError`. ``limits`` bound every admin query (default
    :class:`~llmtap.store.readonly.QueryLimits`). ``engine_process`` (the sidecar): the embedded
    engine runs in a process of its own, started when needed (:mod:`.engine`).
    """
    limits = limits or QueryLimits()
    if url.strip().lower() == "none":
        return None
    scheme = urlsplit(url).scheme.lower()
    if read_url and scheme not in ("clickhouse", "clickhouses"):
        raise StoreURLError(_READ_STORE)
    if scheme == "chdb":
        from .embedded import ChdbBackend

        path = chdb_path(url)
        if for_reading and not is_store(path):
            raise StoreURLError(f"no llmtap store in {path}")
        if engine_process:
            from .engine import EngineClient

            engine = EngineClient(path, DEFAULT_DB, retention, limits)
            engine.start()  # the store is created or upgraded now, and a broken one said so at start
            return engine
        return ChdbBackend(path, DEFAULT_DB, retention, limits)
    if scheme in ("clickhouse", "clickhouses"):
        from .clickhouse import ClickHouseBackend, ClickHouseURLError

        try:
            return ClickHouseBackend(
                url,
                retention=retention,
                read_url=read_url,
                writer=not for_reading,
                read_only=for_reading,
                limits=limits,
            )
        except ClickHouseURLError as e:
            raise StoreURLError(str(e)) from None
    raise StoreURLError(_UNKNOWN.format(scheme=scheme))
