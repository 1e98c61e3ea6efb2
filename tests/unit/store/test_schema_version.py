"""When a store is upgraded (issue 28): decided from its recorded versions and its tables' columns, against the one
schema — no number bumped by hand, no migration to forget (the engine runs none of this: fake execute/scalar)."""

from __future__ import annotations

import pytest

from llmtap.store.schema import _TABLE_RE, SCHEMA_VERSION, UPGRADED_TABLES, _columns, apply_schema, schema_statements


def columns() -> set[tuple[str, str]]:
    out = set()
    for stmt in schema_statements():
        m = _TABLE_RE.match(stmt)
        if m and m.group(2) in UPGRADED_TABLES:
            out |= {(m.group(2), c.split()[0]) for c in _columns(m.group(3))}
    return out


def run(versions: list[int], present: set[tuple[str, str]]) -> tuple[str, list[str]]:
    executed: list[str] = []

    def scalar(sql: str) -> str:
        if "llmtap_schema" in sql:
            return ",".join(str(v) for v in versions)
        return ",".join(f"{t}.{c}" for t, c in sorted(present))

    return apply_schema(executed.append, scalar), executed


def test_a_new_store_is_created_and_records_the_version_with_no_upgrade_statement() -> None:
    outcome, executed = run([], set())
    assert outcome == "created"
    assert executed[-1] == f"INSERT INTO llmtap.llmtap_schema (version) VALUES ({SCHEMA_VERSION})"
    assert not [s for s in executed if s.startswith("ALTER")]  # a new store's tables are today's: nothing to add


def test_a_store_at_this_version_with_every_column_is_left_as_it_is() -> None:
    outcome, executed = run([SCHEMA_VERSION], columns())
    assert outcome == "current" and not [s for s in executed if s.startswith(("ALTER", "INSERT"))]


@pytest.mark.parametrize("old", [1, 2, 3, (SCHEMA_VERSION >> 16) - 1 << 16])
def test_a_store_an_earlier_schema_made_is_upgraded(old: int) -> None:
    outcome, executed = run([old], columns())
    assert outcome == "upgraded" and any(" MODIFY QUERY " in s for s in executed)


def test_a_column_missing_from_a_store_is_added_whatever_its_version_rows_say() -> None:
    """A store whose version row is today's but whose llm_calls lacks a column (a branch that added others)."""
    gone = ("llm_calls", "uncached_input_cost_usd")
    outcome, executed = run([SCHEMA_VERSION], columns() - {gone})
    assert outcome == "upgraded"
    assert any(s.startswith("ALTER TABLE llmtap.llm_calls ADD COLUMN IF NOT EXISTS uncached_input_cost_usd ")
               for s in executed)  # fmt: skip


def test_a_store_a_newer_schema_made_is_left_alone() -> None:
    """A rolling update: a newer sidecar upgraded the store, an older one starts on it and keeps its views."""
    newer = ((SCHEMA_VERSION >> 16) + 3) << 16
    outcome, executed = run([SCHEMA_VERSION, newer], columns() | {("llm_calls", "a_later_column")})
    assert outcome == "current" and not [s for s in executed if s.startswith(("ALTER", "INSERT"))]
