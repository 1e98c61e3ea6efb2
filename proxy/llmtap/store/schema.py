"""The schema engine: ``collector/schema.sql`` (the one SQL source) → statements for one server, a cluster,
retention."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

DEFAULT_DB = "llmtap"
SCHEMA_VERSION = 1  # bump with a new migration when collector/schema.sql changes incompatibly
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
    return [s.strip().replace("{db}", db) for s in text.split(";") if s.strip()]


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
