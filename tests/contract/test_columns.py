"""docs/columns.md is generated from the schema and the meanings, and stays in step with both and the record."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from llmtap.record import COLUMN_NAMES
from llmtap.store import reference

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_is_what_the_generator_writes() -> None:
    page = (ROOT / "docs" / "columns.md").read_text()
    assert page == reference.render(), "docs/columns.md is stale: run python -m llmtap.store.reference"


def test_the_provider_values_on_providers_md_are_what_the_generator_writes() -> None:
    page = (ROOT / "docs" / "providers.md").read_text()
    assert reference.BEGIN in page and reference.END in page
    assert page == reference.providers_page(), "docs/providers.md is stale: run python -m llmtap.store.reference"


def test_every_column_has_a_meaning_and_every_meaning_a_column() -> None:
    cols = reference.table_columns()
    words = tomllib.loads((ROOT / "collector" / "columns.toml").read_text())
    assert set(cols) == set(reference.TABLES) == set(words)
    for table, columns in cols.items():
        names = [n for n, _ in columns]
        missing = [n for n in names if not words[table].get(n, "").strip()]
        stale = sorted(set(words[table]) - set(names))
        assert not missing, f"{table}: no meaning in collector/columns.toml for {missing}"
        assert not stale, f"{table}: meanings for columns the schema does not have: {stale}"


def test_llm_calls_on_the_page_are_the_records_columns_in_schema_order() -> None:
    page = (ROOT / "docs" / "columns.md").read_text()
    section = page.split("## `llm_calls`", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert listed == [n for n, _ in reference.table_columns()["llm_calls"]]
    assert set(COLUMN_NAMES) - set(listed) == {"server_port"}  # on the span (server.port), not a column
    assert set(listed) <= set(COLUMN_NAMES)
    outcome = next(line for line in section.splitlines() if line.startswith("| `outcome`"))
    assert "Values: `ok`, `error`, `cancelled`." in outcome  # from record.Outcome, not typed by hand
