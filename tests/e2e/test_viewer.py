"""The built-in viewer in a real browser (Debian's Chromium driven by Playwright) on seeded data."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import LLMTAP, Sidecar, start_sidecar, stop

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
BOARDS = ["llmtap-overview", "llmtap-latency", "llmtap-cost", "llmtap-errors", "llmtap-agents", "llmtap-calls"]

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Debian's chromium: .ci/run installs it (apt-get install chromium)")
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def seeded_sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    data = tmp_path_factory.mktemp("viewer") / "data"
    r = subprocess.run(
        [
            *LLMTAP,
            "seed",
            "--data-dir",
            str(data),
            "--calls",
            "20000",
            "--days",
            "8",
            "--windows",
            "300",
            "--regression",
            "summarize:1.6",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    sc = start_sidecar(data, None)
    yield sc
    stop(sc.proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def open_board(browser: Any, sc: Sidecar, fragment: str) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"http://127.0.0.1:{sc.admin}/#{fragment}")
    wait_rendered(page)
    return page, errors


def wait_rendered(page: Any) -> None:
    page.wait_for_function(
        "() => { const p = [...document.querySelectorAll('.panel')];"
        " return p.length > 0 && p.every(x => x.dataset.state); }",
        timeout=60000,
    )


def panel_states(page: Any) -> list[dict[str, Any]]:
    return list(
        page.eval_on_selector_all(
            ".panel",
            """els => els.map(e => ({type: e.dataset.type,
        state: e.dataset.state, title: e.querySelector('h2').textContent,
        error: e.querySelector('.error') ? e.querySelector('.error').textContent : '',
        drawn: !!e.querySelector('.body svg, .body table, .body .stat'),
        empty: !!e.querySelector('.body .empty')}))""",
        )
    )


@pytest.mark.parametrize("uid", BOARDS)
def test_every_panel_renders_without_console_errors(browser: Any, seeded_sidecar: Sidecar, uid: str) -> None:
    page, errors = open_board(browser, seeded_sidecar, uid)
    states = panel_states(page)
    board = page.evaluate("() => ({title: document.getElementById('title').textContent})")
    assert board["title"].startswith("LLM")
    assert states and all(s["state"] == "rendered" for s in states), [s for s in states if s["state"] != "rendered"]
    assert all(s["drawn"] and not s["empty"] for s in states), [s["title"] for s in states if not s["drawn"]]
    assert {s["type"] for s in states} <= {"timeseries", "stat", "table", "barchart", "heatmap"}
    assert errors == []
    shots = os.environ.get("LLMTAP_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / f"viewer-{uid.removeprefix('llmtap-')}.png"), full_page=True)
    page.close()


def test_panel_types_cover_what_the_dashboards_use(browser: Any, seeded_sidecar: Sidecar) -> None:
    seen: set[str] = set()
    for uid in BOARDS:
        page, _ = open_board(browser, seeded_sidecar, uid)
        seen |= {s["type"] for s in panel_states(page)}
        page.close()
    assert {"timeseries", "stat", "table", "barchart", "heatmap"} <= seen


def test_variables_range_and_trace_link(browser: Any, seeded_sidecar: Sidecar) -> None:
    page, errors = open_board(browser, seeded_sidecar, "llmtap-calls")
    options = page.eval_on_selector("select[data-var=provider]", "s => [...s.options].map(o => o.value)")
    assert "$__all" in options and "openai" in options and "anthropic" in options
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/api/panel" in r.url else None)
    page.select_option("select[data-var=provider]", "anthropic")
    page.wait_for_timeout(300)
    wait_rendered(page)
    providers = page.eval_on_selector_all(".panel table tr td:nth-child(3)", "tds => tds.map(t => t.textContent)")
    assert providers and set(providers) == {"anthropic"}
    page.select_option("#range", "3600")
    page.wait_for_timeout(300)
    wait_rendered(page)
    assert len(requests) >= 2  # re-queried on each change
    link = page.eval_on_selector(".panel table a[href^='#call']", "a => a.getAttribute('href')")
    assert link.startswith("#call?trace_id=")
    page.click(".panel table a[href^='#call']")  # a row leads to its call page, the call page to its span
    page.wait_for_function("() => document.getElementById('page').dataset.state === 'rendered'")
    assert "anthropic" in page.inner_text("#page")
    page.click("#page .links a[href^='#llmtap-trace']")
    page.wait_for_function("() => document.getElementById('title').textContent === 'LLM trace'")
    wait_rendered(page)
    trace = panel_states(page)[0]
    assert trace["type"] == "traces" and trace["state"] == "rendered" and trace["drawn"]
    assert "gen_ai.provider.name=anthropic" in page.inner_text(".panel .body")
    assert errors == []
    page.close()


def test_report_command(seeded_sidecar: Sidecar) -> None:
    r = subprocess.run(
        [*LLMTAP, "report", "--since", "7d", "--admin", f"127.0.0.1:{seeded_sidecar.admin}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stderr
    for needle in ("last 7d", "By model", "gpt-4o", "Errors", "quota_exhausted", "cost_usd"):
        assert needle in r.stdout, needle
