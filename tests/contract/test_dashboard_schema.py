"""The committed dashboards are byte for byte what dashboards/generate.py writes, and every one conforms to
Grafana's dashboard schema as grafana-foundation-sdk types it (dashboards/dashboard_schema.py); the check itself
finds what does not conform."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dashboard_schema
import generate
import pytest

ROOT = Path(__file__).resolve().parents[2]
BOARDS = sorted(p.name for p in (ROOT / "dashboards/json").glob("*.json"))


def committed(name: str) -> dict[str, Any]:
    board: dict[str, Any] = json.loads((ROOT / "dashboards/json" / name).read_text())
    return board


def test_committed_files_are_exactly_what_the_generator_writes() -> None:
    files = generate.files()
    assert {f"dashboards/json/{n}" for n in BOARDS} | {generate.ALERTS} == set(files)  # no stale board either
    for rel, text in files.items():
        assert (ROOT / rel).read_text() == text, f"{rel}: run python dashboards/generate.py"


@pytest.mark.parametrize("name", BOARDS)
def test_every_board_conforms_to_grafanas_dashboard_schema(name: str) -> None:
    assert dashboard_schema.problems(committed(name)) == []


def _panel(board: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(p for p in board["panels"] if p["type"] == kind)


def _set(path: list[str | int], value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(board: dict[str, Any]) -> None:
        node: Any = board
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value

    return apply


def _drop_show_legend(board: dict[str, Any]) -> None:
    del _panel(board, "timeseries")["options"]["legend"]["showLegend"]


def _misspell_unit_key(board: dict[str, Any]) -> None:
    defaults = _panel(board, "stat")["fieldConfig"]["defaults"]
    defaults["units"] = defaults.pop("unit")


def _rename_sql_key(board: dict[str, Any]) -> None:
    target = _panel(board, "stat")["targets"][0]
    target["rawSQL"] = target.pop("rawSql")


def _legend_mode(mode: str) -> Callable[[dict[str, Any]], None]:
    def apply(board: dict[str, Any]) -> None:
        _panel(board, "timeseries")["options"]["legend"]["displayMode"] = mode

    return apply


def _other_datasource(board: dict[str, Any]) -> None:
    stat = _panel(board, "stat")
    stat["datasource"] = stat["targets"][0]["datasource"] = {"type": "some-other-datasource", "uid": "x"}


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_set(["panels", 0, "gridpos"], {"x": 0}), ".panels[0].gridpos: not in the schema"),
        (_misspell_unit_key, "fieldConfig.defaults.units: not in the schema"),
        (_rename_sql_key, "targets[0].rawSql: missing (required)"),
        (_drop_show_legend, "options.legend.showLegend: missing (required)"),
        (_legend_mode("tabel"), 'options.legend.displayMode: "tabel" is not a LegendDisplayMode'),
        (_set(["graphTooltip"], "1"), '.graphTooltip: "1" is not a DashboardCursorSync'),
        (_set(["refresh"], 30), ".refresh: 30 is not str"),
        (_set(["templating", "list", 0, "refresh"], 7), ".templating.list[0].refresh: 7 is not a VariableRefresh"),
        (_set(["panels", 0, "gridPos", "w"], "6"), '.panels[0].gridPos.w: "6" is not int'),
        (_set(["panels", 0, "targets", 0, "format"], 9), "does not decode"),
        (_other_datasource, "a query of a data source the schema check does not know"),
    ],
    ids=[
        "unknown-key",
        "misspelt-key",
        "renamed-query-key",
        "required-missing",
        "enum-value",
        "enum-type",
        "string-type",
        "variable-enum",
        "int-type",
        "query-format",
        "other-datasource",
    ],
)
def test_schema_check_finds_what_does_not_conform(mutate: Callable[[dict[str, Any]], None], expected: str) -> None:
    board = copy.deepcopy(committed("overview.json"))
    assert dashboard_schema.problems(board) == []
    mutate(board)
    found = dashboard_schema.problems(board)
    assert any(expected in p for p in found), found


def test_the_generator_refuses_a_board_that_does_not_conform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    good = generate.build
    monkeypatch.setattr(generate, "build", lambda: {n: b | {"graphTooltip": "1"} for n, b in good().items()})
    with pytest.raises(SystemExit) as e:
        generate.write(tmp_path)
    assert "does not conform to Grafana's dashboard schema: .graphTooltip" in str(e.value)
    assert "\n" not in str(e.value)
    assert not any(tmp_path.rglob("*"))  # nothing written
