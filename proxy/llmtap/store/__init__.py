"""Stores: where records go. The schema comes from one SQL source (``collector/schema.sql``)."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

DEFAULT_DB = "llmtap"
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


class Backend(Protocol):
    """What the writer needs from a store."""

    def insert_spans(self, rows: list[dict[str, Any]]) -> None: ...

    def query(self, sql: str, fmt: str = "JSONEachRow") -> bytes: ...

    def close(self) -> None: ...
