"""Stores: where records go. The schema comes from one SQL source (``collector/schema.sql``)."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Protocol

DEFAULT_DB = "llmtap"
SCHEMA_VERSION = 1  # bump with a new migration when collector/schema.sql changes incompatibly
_DB_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def schema_sql() -> str:
    """The schema text: packaged copy in a wheel, ``collector/schema.sql`` in a checkout."""
    try:
        packaged = resources.files("llmtap").joinpath("schema.sql")
        if packaged.is_file():
            return packaged.read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        pass
    repo = Path(__file__).resolve().parents[3] / "collector" / "schema.sql"
    return repo.read_text()


def schema_statements(db: str = DEFAULT_DB) -> list[str]:
    if not _DB_RE.match(db):
        raise ValueError(f"invalid database name {db!r}")
    text = "\n".join(line for line in schema_sql().splitlines() if not line.lstrip().startswith("--"))
    return [s.strip().replace("{db}", db) for s in text.split(";") if s.strip()]


# table → (time expression) for retention; see retention_statement.
RETENTION_TABLES = {
    "otel_traces": "toDateTime(Timestamp)",
    "llm_calls": "toDateTime(timestamp)",
    "llm_content": "toDateTime(timestamp)",
}


def retention_statement(db: str, table: str, days: int) -> str:
    """``ALTER TABLE ... MODIFY TTL`` (days > 0) or ``REMOVE TTL`` (0): applied at every start."""
    if table not in RETENTION_TABLES or not _DB_RE.match(db):
        raise ValueError(f"no retention for {db}.{table}")
    if days <= 0:
        return f"ALTER TABLE {db}.{table} REMOVE TTL"
    return f"ALTER TABLE {db}.{table} MODIFY TTL {RETENTION_TABLES[table]} + toIntervalDay({int(days)})"


class Backend(Protocol):
    """What the writer needs from a store."""

    def insert_rows(self, rows: list[bytes], token: str) -> None:
        """Insert ``otel_traces`` rows (JSON lines); ``token`` deduplicates a re-sent batch."""

    def query(self, sql: str, fmt: str = "JSONEachRow") -> bytes: ...

    def close(self) -> None: ...
