"""The schema engine: ``collector/schema.sql`` (the one SQL source) → statements for one server, a cluster,
retention, and the upgrade of a store an earlier version created.

Upgrades are derived from the same source, never written by hand: when the store's recorded
version is older than :data:`SCHEMA_VERSION`, every column of llmtap's own tables is
added if missing (``ADD COLUMN IF NOT EXISTS``, additive by the contract) and every
materialized view gets the current query (``MODIFY QUERY``, atomic: no insert goes
untransformed). The Collector's ``otel_traces`` is never altered.

The version is derived from the schema text too (:func:`schema_version`), so a change to
``collector/schema.sql`` cannot ship without it: its high 16 bits count the columns of llmtap's
own tables (the contract only adds columns, so a newer schema never counts fewer: a sidecar
never takes a store back to an older schema), its low 16 bits are a digest of the statements
(a view changed without a new column is a new version of the same count).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ..record import LLM_CALL_SQL

DEFAULT_DB = "llmtap"
DB_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
    if not DB_NAME_RE.match(db):
        raise ValueError(f"invalid database name {db!r}")
    text = "\n".join(line for line in schema_sql().splitlines() if not line.lstrip().startswith("--"))
    return [s.strip().replace("{db}", db).replace("{llm_call}", LLM_CALL_SQL) for s in text.split(";") if s.strip()]


_TABLE_RE = re.compile(r"^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+) \((.*)\) ENGINE = (\w+)\(\)(.*)$", re.S)
_MV_RE = re.compile(r"^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+)\.(\w+) TO (\w+)\.(\w+) AS(.*)$", re.S)
# Sharding keys of the Distributed tables that receive inserts: a trace stays on one shard.
_SHARDING = {"otel_traces": "cityHash64(TraceId)"}


def cluster_statements(db: str = DEFAULT_DB, cluster: str = "default") -> list[str]:
    """The same schema for a ClickHouse cluster.

    Every table becomes ``<name>_local`` (Replicated*MergeTree, ``ON CLUSTER``) plus a
    ``Distributed`` table with the original name over it; views read and write the local
    tables on each shard. Writers (llmtap, the Collector) insert into ``otel_traces``
    (distributed by trace id); dashboards read ``llm_calls`` (distributed).
    """
    if not DB_NAME_RE.match(cluster):
        raise ValueError(f"invalid cluster name {cluster!r}")
    on = f"ON CLUSTER '{cluster}'"
    out: list[str] = []
    for stmt in schema_statements(db):
        if stmt.startswith("CREATE DATABASE"):
            out.append(f"{stmt} {on}")
        elif m := _TABLE_RE.match(stmt):
            sdb, name, cols, engine, rest = m.groups()
            rest = rest.replace("non_replicated_deduplication_window", "replicated_deduplication_window")
            zk = f"'/clickhouse/tables/{{shard}}/{sdb}/{name}_local', '{{replica}}'"
            out.append(
                f"CREATE TABLE IF NOT EXISTS {sdb}.{name}_local {on} ({cols}) ENGINE = Replicated{engine}({zk}){rest}"
            )
            out.append(
                f"CREATE TABLE IF NOT EXISTS {sdb}.{name} {on} AS {sdb}.{name}_local "
                f"ENGINE = Distributed('{cluster}', {sdb}, {name}_local, {_SHARDING.get(name, 'rand()')})"
            )
        elif m := _MV_RE.match(stmt):
            sdb, name, tdb, target, select = m.groups()
            select = re.sub(rf"\bFROM {sdb}\.(\w+)", rf"FROM {sdb}.\1_local", select)
            out.append(f"CREATE MATERIALIZED VIEW IF NOT EXISTS {sdb}.{name} {on} TO {tdb}.{target}_local AS{select}")
        else:
            raise ValueError(f"no cluster form for: {stmt[:60]}")
    return out


def sorting_key(table: str) -> tuple[str, ...]:
    """The columns of ``table``'s ORDER BY in the schema (what an AggregatingMergeTree rollup is keyed by)."""
    for stmt in schema_statements():
        m = _TABLE_RE.match(stmt)
        if m and m.group(2) == table:
            key = re.search(r"\bORDER BY \(([^)]*)\)", m.group(5))
            if key:
                return tuple(c.strip() for c in key.group(1).split(","))
    raise KeyError(f"no ORDER BY for {table} in the schema")


# table → (time expression) for retention; see retention_statement.
RETENTION_TABLES = {
    "otel_traces": "toDateTime(Timestamp)",
    "llm_calls": "toDateTime(timestamp)",
    "llm_content": "toDateTime(timestamp)",
    "llm_calls_hourly": "hour",
}


def retention_statement(db: str, table: str, days: int) -> str:
    """``ALTER TABLE ... MODIFY TTL`` (days > 0) or ``REMOVE TTL`` (0): applied at every start."""
    if table not in RETENTION_TABLES or not DB_NAME_RE.match(db):
        raise ValueError(f"no retention for {db}.{table}")
    if days <= 0:
        return f"ALTER TABLE {db}.{table} REMOVE TTL"
    return f"ALTER TABLE {db}.{table} MODIFY TTL {RETENTION_TABLES[table]} + toIntervalDay({int(days)})"


UPGRADED_TABLES = ("llm_calls", "llm_content", "llm_calls_hourly")


def _columns(body: str) -> list[str]:
    """Column definitions of a CREATE TABLE body (split at top-level commas; INDEX lines left out)."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in body:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    return [c for c in out if c and not c.upper().startswith("INDEX ")]


def _upgrade_of(stmt: str) -> list[str]:
    """The statements that bring what ``stmt`` creates up to date when an earlier version created it."""
    if m := _TABLE_RE.match(stmt):
        sdb, name, cols = m.group(1), m.group(2), m.group(3)
        if name in UPGRADED_TABLES:
            return [f"ALTER TABLE {sdb}.{name} ADD COLUMN IF NOT EXISTS {c}" for c in _columns(cols)]
    elif m := _MV_RE.match(stmt):
        return [f"ALTER TABLE {m.group(1)}.{m.group(2)} MODIFY QUERY {m.group(5).strip()}"]
    return []


def schema_version(db: str = DEFAULT_DB) -> int:
    """``columns << 16 | digest``: the columns of llmtap's own tables, and 16 bits of the statements' hash."""
    stmts = schema_statements(db)
    columns = sum(
        len(_columns(m.group(3))) for s in stmts if (m := _TABLE_RE.match(s)) and m.group(2) in UPGRADED_TABLES
    )
    digest = hashlib.sha256("\n".join(stmts).encode()).digest()
    return columns << 16 | int.from_bytes(digest[:2], "big")


def needs_upgrade(columns_recorded: int, version_recorded: bool, version: int) -> bool:
    """Whether a store brings itself to ``version``: it records fewer columns (an older schema), or as
    many under another digest and never this one. A store that counts more is newer: left alone."""
    columns = version >> 16
    return columns_recorded < columns or (columns_recorded == columns and not version_recorded)


def upgrade_statements(db: str = DEFAULT_DB) -> list[str]:
    """What brings a store created by an earlier version to the current schema (idempotent)."""
    return [u for stmt in schema_statements(db) for u in _upgrade_of(stmt)]


def missing_columns(stmts: list[str], present: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """``(table, column)`` of llmtap's own tables the schema has and a store's existing tables lack (``present``:
    every ``(table, column)`` of the store's database; a table absent from it is created whole, not upgraded)."""
    tables = {t for t, _ in present}
    out = []
    for stmt in stmts:
        m = _TABLE_RE.match(stmt)
        if m and m.group(2) in UPGRADED_TABLES and m.group(2) in tables:
            named = [(m.group(2), c.split()[0]) for c in _columns(m.group(3))]
            out += [tc for tc in named if tc not in present]
    return out


SchemaOutcome = Literal["created", "upgraded", "current"]
"""What :func:`apply_schema` did: made a new store, brought an earlier one up to date, or found it current."""


def apply_schema(execute: Callable[[str], Any], scalar: Callable[[str], Any], db: str = DEFAULT_DB) -> SchemaOutcome:
    """Create what is missing, upgrade what an earlier version made, record the version.

    A store without any of llmtap's tables is new: its tables are created at today's schema and the version is
    recorded, with no upgrade statement (there is nothing to bring up to date: running the ~130 idempotent
    ``ADD COLUMN``s on a new store cost six seconds of every first start).

    A store is upgraded when its recorded versions say an older schema made it (:func:`needs_upgrade`: fewer
    columns, or as many under another digest) or when a table of llmtap's lacks a column the schema has
    (whatever the version rows say: a store written by a branch that added other columns, a version row
    without its columns). Nothing is written by hand per release: every column comes from the one schema.
    Each table gains its missing columns right after its CREATE, before any view that reads or writes it is
    created or given its new query (the engine checks a view's columns against its target). A store that
    records more columns than this build knows (a newer sidecar upgraded it: a rolling update) is left alone.
    """
    stmts = schema_statements(db)
    version_table = next(s for s in stmts if ".llmtap_schema " in s)
    execute(f"CREATE DATABASE IF NOT EXISTS {db}")
    execute(version_table)
    recorded = str(scalar(f"SELECT arrayStringConcat(arraySort(groupUniqArray(toString(version))), ',') "
                          f"FROM {db}.llmtap_schema") or "")  # fmt: skip
    versions = {int(v) for v in recorded.replace("\n", ",").split(",") if v.strip().isdigit()}
    listed = str(scalar(f"SELECT arrayStringConcat(groupArray(concat(table, '.', name)), ',') FROM system.columns "
                        f"WHERE database = '{db}' AND table IN {tuple(UPGRADED_TABLES)}") or "")  # fmt: skip
    present = {(t, c) for t, _, c in (x.partition(".") for x in listed.split(",")) if c}
    newest = max((v >> 16 for v in versions), default=0)
    new = not present  # none of llmtap's tables exists yet: created whole below
    upgrade = not new and (
        needs_upgrade(newest, SCHEMA_VERSION in versions, SCHEMA_VERSION) or bool(missing_columns(stmts, present))
    )
    if newest > SCHEMA_VERSION >> 16:
        upgrade = False  # a newer sidecar's schema (a rolling update): its views are newer than ours
    for stmt in stmts:
        execute(stmt)
        if upgrade:
            for u in _upgrade_of(stmt):
                execute(u)
    if upgrade or (new and SCHEMA_VERSION not in versions and newest <= SCHEMA_VERSION >> 16):
        execute(f"INSERT INTO {db}.llmtap_schema (version) VALUES ({SCHEMA_VERSION})")
    return "upgraded" if upgrade else "created" if new else "current"


SCHEMA_VERSION = schema_version()
"""This build's schema version (derived from ``collector/schema.sql``: :func:`schema_version`)."""
