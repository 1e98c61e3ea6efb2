"""The docs say what the code does."""

from __future__ import annotations

import re
from pathlib import Path

from llmtap.capture.taxonomy import RULES
from llmtap.record import ERROR_TYPES

ROOT = Path(__file__).resolve().parents[2]


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [line for b in blocks for line in b.splitlines() if line.strip() and not line.startswith("#")]


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one() -> None:
    cmds = quick_start_commands()
    assert len(cmds) == 2
    # one mechanism finds Python 3.12 for the README and for CI (tests/contract/test_bootstrap.py tests it)
    assert cmds[0] == "./bootstrap && .venv/bin/llmtap run"
    assert cmds[1].startswith("./bootstrap test && ")
    assert ".venv/bin/ruff check proxy tests bench dashboards " in cmds[1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert cmds[1] in ci, "the README's test command must be what .ci/run runs, verbatim"
    assert "python3.12" not in "\n".join(line for line in ci if not line.startswith("#"))  # no second mechanism


def test_error_taxonomy_table_matches_the_code() -> None:
    doc = (ROOT / "docs" / "error-taxonomy.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+)` \| (.*?) \| (.*?) \| (.*?) \|$", doc, re.M)
    table = {r[0]: r for r in rows}
    assert [r[0] for r in rows[: len(RULES)]] == [rule.error_type for rule in RULES]
    for rule in RULES:
        _, codes, phrases, statuses = table[rule.error_type]
        assert re.findall(r"`([^`]+)`", codes) == list(rule.codes)
        assert re.findall(r"“([^”]+)”", phrases) == list(rule.phrases)
        assert [int(s) for s in re.findall(r"\d+", statuses)] == list(rule.statuses)
    assert set(table) == set(ERROR_TYPES) - {""}


def test_readme_says_json_sql_needs_its_content_type() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("`POST /api/sql`") :][:600]
    assert "Content-Type: application/json" in section and '"query"' in section


def test_every_mock_scenario_is_documented() -> None:
    from llmtap.testing.mock import GARBAGE, hostile

    mock = ROOT / "proxy" / "llmtap" / "testing" / "mock"
    names = set(GARBAGE) | {"garbage_json_body"} | set(hostile.SCENARIOS)
    for src in mock.glob("*.py"):
        names |= set(re.findall(r'scenario == "([a-z0-9_]+)"', src.read_text()))
    documented = set(re.findall(r"^\| `([a-z0-9_]+)` \|", (ROOT / "docs" / "mock-provider.md").read_text(), re.M))
    assert names and names <= documented, f"not in docs/mock-provider.md: {sorted(names - documented)}"
    assert documented == names, f"documented but unknown to the mock: {sorted(documented - names)}"
