"""Stores: where records go — the embedded engine (chDB) or a ClickHouse server, behind a durable spool.

The face: :class:`Backend` (what the writer needs from a store), :func:`open_backend` (a store
URL → a backend), :class:`StoreSink` (the pipeline's sink), and the schema engine
(:mod:`.schema`, from the one SQL source ``collector/schema.sql``).
"""

from __future__ import annotations

from .backend import Backend
from .schema import (
    DB_NAME_RE,
    DEFAULT_DB,
    SCHEMA_VERSION,
    cluster_statements,
    retention_statement,
    schema_sql,
    schema_statements,
)
from .sink import StoreSink
from .url import StoreURLError, default_store_url, open_backend

__all__ = [
    "DB_NAME_RE",
    "DEFAULT_DB",
    "SCHEMA_VERSION",
    "Backend",
    "StoreSink",
    "StoreURLError",
    "cluster_statements",
    "default_store_url",
    "open_backend",
    "retention_statement",
    "schema_sql",
    "schema_statements",
]
