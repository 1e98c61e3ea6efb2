"""``llmtap reconcile``'s reading of the providers' cost reports (their documented example responses,
tests/unit/cli/fixtures/billing/PROVENANCE.md) and its comparison with what llmtap tracked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmtap.cli.reconcile import ALL, Billed, ReportError, compare, model_key, parse_anthropic, parse_openai

BILLING = Path(__file__).resolve().parent / "fixtures" / "billing"


def test_openai_documented_example() -> None:
    billed = parse_openai(json.loads((BILLING / "openai_costs.json").read_text()))
    # 1730419200 is 2024-11-01T00:00:00Z; the result is not grouped by line item: the day as a whole
    assert dict(billed.usd) == {("2024-11-01", ALL): pytest.approx(0.06)}
    assert (billed.start, billed.end) == (1730419200, 1730505600)


def test_anthropic_documented_example_amounts_are_cents() -> None:
    billed = parse_anthropic(json.loads((BILLING / "anthropic_cost_report.json").read_text()))
    assert dict(billed.usd) == {("2025-08-01", "claude-sonnet-4"): pytest.approx(1.2378912)}


def test_openai_line_items_name_the_model_and_pages_add_up() -> None:
    def page(start: int, items: list[tuple[str, float]]) -> dict[str, object]:
        results = [
            {"object": "organization.costs.result", "amount": {"value": v, "currency": "usd"}, "line_item": i}
            for i, v in items
        ]
        return {"object": "page", "data": [{"start_time": start, "end_time": start + 86400, "results": results}]}

    doc = [
        page(1730419200, [("gpt-4o-2024-08-06, input", 0.5), ("gpt-4o-2024-08-06, cached input", 0.1)]),
        page(1730505600, [("gpt-4o-mini-2024-07-18, output", 0.25)]),
    ]
    billed = parse_openai(doc)
    assert dict(billed.usd) == {
        ("2024-11-01", "gpt-4o"): pytest.approx(0.6),
        ("2024-11-02", "gpt-4o-mini"): pytest.approx(0.25),
    }


@pytest.mark.parametrize(
    "doc",
    [
        {"object": "page"},
        [],
        {"data": [{"start_time": "yesterday", "results": []}]},
        {"data": [{"start_time": 0, "end_time": 1, "results": [{"amount": {"value": 1, "currency": "eur"}}]}]},
    ],
)
def test_bad_reports_are_refused(doc: object) -> None:
    with pytest.raises(ReportError):
        parse_openai(doc)


def test_model_key_drops_date_suffixes() -> None:
    assert [model_key(m) for m in ("gpt-4o-2024-08-06", "claude-sonnet-4-20250514", "GPT-5", "")] == [
        "gpt-4o",
        "claude-sonnet-4",
        "gpt-5",
        ALL,
    ]


def test_compare_per_day_and_model_and_whole_days() -> None:
    billed = Billed()
    billed.add(1730419200, 1730505600, "gpt-4o-2024-08-06", 1.0)  # 2024-11-01, by model
    billed.add(1730505600, 1730592000, "", 2.0)  # 2024-11-02, the day as a whole
    tracked = [
        {"day": "2024-11-01", "model": "gpt-4o-2024-08-06", "calls": 3, "tracked_usd": 0.9},
        {"day": "2024-11-01", "model": "o3", "calls": 1, "tracked_usd": 0.1},  # tracked, never billed
        {"day": "2024-11-02", "model": "gpt-4o", "calls": 2, "tracked_usd": 1.0},
        {"day": "2024-11-02", "model": "o3", "calls": 2, "tracked_usd": 0.5},
    ]
    rows = {(r["day"], r["model"]): r for r in compare(billed, tracked)}
    assert rows[("2024-11-01", "gpt-4o")]["capture"] == pytest.approx(0.9)
    assert rows[("2024-11-01", "o3")]["billed_usd"] == 0 and rows[("2024-11-01", "o3")]["capture"] is None
    whole = rows[("2024-11-02", ALL)]
    assert (whole["calls"], whole["tracked_usd"], whole["capture"]) == (4, 1.5, pytest.approx(0.75))
