"""The built-in viewer in a real browser (Debian's Chromium driven by Playwright) on seeded data."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from browser import CHROMIUM, FLAGS, MARK, PANELS_DRAWN, opened, page_drawn, redrawn, sign_in
from helpers import LLMTAP, Sidecar, start_sidecar, stop

BOARDS = ["llmtap-overview", "llmtap-latency", "llmtap-cost", "llmtap-errors", "llmtap-agents", "llmtap-calls"]

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Debian's chromium: .ci/run installs it (apt-get install chromium)")
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(300)]


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
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def browser(chromium: Any, seeded_sidecar: Sidecar) -> Iterator[Any]:
    """A browser context signed in to the viewer the way a user is: a link carrying the install's token."""
    ctx = sign_in(chromium, seeded_sidecar)
    yield ctx
    ctx.close()


@contextmanager
def open_board(browser: Any, sc: Sidecar, fragment: str) -> Iterator[tuple[Any, list[str]]]:
    """A new page on the board, drawn; closed when the test is done with it (pass or fail)."""
    errors: list[str] = []
    with opened(browser, errors) as page:
        page.goto(f"http://127.0.0.1:{sc.admin}/#{fragment}")
        wait_rendered(page)
        yield page, errors


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
    with open_board(browser, seeded_sidecar, uid) as (page, errors):
        states = panel_states(page)
        board = page.evaluate("() => ({title: document.getElementById('title').textContent})")
    assert board["title"].startswith("LLM")
    assert states and all(s["state"] == "rendered" for s in states), [s for s in states if s["state"] != "rendered"]
    assert all(s["drawn"] and not s["empty"] for s in states), [s["title"] for s in states if not s["drawn"]]
    assert {s["type"] for s in states} <= {"timeseries", "stat", "table", "barchart", "heatmap"}
    assert errors == []  # screenshots of every board: test_viewer_layout.py


def test_panel_types_cover_what_the_dashboards_use(browser: Any, seeded_sidecar: Sidecar) -> None:
    seen: set[str] = set()
    for uid in BOARDS:
        with open_board(browser, seeded_sidecar, uid) as (page, _):
            seen |= {s["type"] for s in panel_states(page)}
    assert {"timeseries", "stat", "table", "barchart", "heatmap"} <= seen


def test_variables_range_and_trace_link(browser: Any, seeded_sidecar: Sidecar) -> None:
    with open_board(browser, seeded_sidecar, "llmtap-calls") as (page, errors):
        options = page.eval_on_selector("select[data-var=provider]", "s => [...s.options].map(o => o.value)")
        assert "$__all" in options and "openai" in options and "anthropic" in options
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url) if "/api/panel" in r.url else None)
        with redrawn(page):
            page.select_option("select[data-var=provider]", "anthropic")
        col = page.eval_on_selector_all(".panel table th", "ths => ths.map(t => t.textContent)").index("provider") + 1
        providers = page.eval_on_selector_all(
            f".panel table tr td:nth-child({col})", "tds => tds.map(t => t.textContent)"
        )
        assert providers and set(providers) == {"anthropic"}
        with redrawn(page):
            page.select_option("#range", "3600")
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


def test_report_command(seeded_sidecar: Sidecar) -> None:
    r = subprocess.run(
        [
            *LLMTAP,
            "report",
            "--since",
            "7d",
            "--admin",
            f"127.0.0.1:{seeded_sidecar.admin}",
            "--data-dir",
            str(seeded_sidecar.data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stderr
    for needle in ("last 7d", "By model", "gpt-4o", "Errors", "quota_exhausted", "cost_usd"):
        assert needle in r.stdout, needle


XSS = [
    '<img src=x onerror="window.__xss=(window.__xss||0)+1">',
    '"><script>window.__xss=(window.__xss||0)+1</script>',
    "<svg/onload=window.__xss=(window.__xss||0)+1>",
    "javascript:window.__xss=(window.__xss||0)+1",
    "'><iframe srcdoc='<script>parent.__xss=1</script>'>",
]


@pytest.fixture(scope="module")
def hostile_sidecar(mock: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sidecar, list[str]]]:
    """Calls whose every attacker-controlled column holds markup: model names (request and response), ids,
    attribution headers, and upstream error messages, codes and types."""
    from llmtap.testing.rawclient import request

    sc = start_sidecar(tmp_path_factory.mktemp("xss") / "data", mock)
    traces: list[str] = []
    for i, payload in enumerate(XSS):
        attribution = {
            f"x-llmtap-{h}": payload for h in ("service", "user", "session", "tenant", "feature", "prompt-version")
        }
        for scenario in ("echo", "echo_error", "default"):
            r = request(
                "api.openai.com",
                443,
                "/v1/chat/completions",
                {"model": payload, "messages": [{"role": "user", "content": payload}]},
                {
                    **attribution,
                    "x-mock-scenario": scenario,
                    "x-mock-echo": payload,
                    "traceparent": f"00-{i:030d}{'ab' if scenario == 'echo' else 'cd'}-{i:016d}-01",
                },
                sc.bundle,
                proxy=("127.0.0.1", sc.listen),
            )
            assert r.status in (200, 400)
        traces.append(f"{i:030d}ab")
        r = request(  # a priced model, so the explain page has this call's markup-named keys to show
            "api.openai.com",
            443,
            "/v1/chat/completions",
            {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": payload}]},
            {**attribution, "x-mock-scenario": "default"},
            sc.bundle,
            proxy=("127.0.0.1", sc.listen),
        )
        assert r.status == 200
    rows = sc.rows("1", 4 * len(XSS), timeout=20)
    assert len(rows) >= 4 * len(XSS)
    assert any(r["error_message"] == XSS[0] for r in rows)  # stored verbatim: the viewer must make it inert
    yield sc, traces
    stop(sc.proc)


INJECTED = (
    "() => ({xss: window.__xss || 0, imgs: document.querySelectorAll('img[src=x]').length,"
    " scripts: document.querySelectorAll('script').length,"
    " frames: document.querySelectorAll('iframe').length,"
    " svgs: [...document.querySelectorAll('svg')].filter(s => s.getAttribute('onload')).length,"
    " handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on')))"
    ".length,"
    " links: [...document.querySelectorAll('a')].filter(a => a.href.startsWith('javascript:')).length})"
)
INERT = {"xss": 0, "imgs": 0, "scripts": 1, "frames": 0, "svgs": 0, "handlers": 0, "links": 0}


def _settle(page: Any, fragment: str) -> None:
    """A board is drawn when every panel it drew anew has a state; a page (call, session, explain) when it says so
    of its new content (what was shown before the step is marked: :data:`browser.MARK`)."""
    name = fragment.split("?", 1)[0]
    if name in ("call", "session", "explain"):
        page.wait_for_function(page_drawn(name), timeout=60000)
        assert page.eval_on_selector("#page", "p => p.dataset.state") == "rendered", (
            fragment,
            page.inner_text("#page"),
        )
        if name == "explain":
            page.wait_for_function(
                "() => [...document.querySelectorAll('[data-section]')].every(s => s.dataset.state)", timeout=60000
            )
            states = page.eval_on_selector_all("[data-section]", "ss => ss.map(s => s.dataset.state)")
            assert set(states) == {"rendered"}, (fragment, page.inner_text("#page"))
    else:
        page.wait_for_function(PANELS_DRAWN, timeout=60000)


def test_markup_in_every_attacker_controlled_column_renders_inert(chromium: Any, hostile_sidecar: Any) -> None:
    """Every board, its dropdowns and the explorer's text filters, the trace view, and the viewer's own pages
    (each call, each session, the explain page by every dimension) with markup in every column they show."""
    from urllib.parse import quote

    sc, traces = hostile_sidecar
    ctx = sign_in(chromium, sc)
    dialogs: list[str] = []
    errors: list[str] = []
    page = ctx.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    every_trace = [r["trace_id"] for r in sc.sql("SELECT DISTINCT trace_id FROM llm_calls ORDER BY trace_id")]
    assert len(every_trace) >= 2 * len(XSS)
    fragments = [
        *BOARDS,
        *(f"llmtap-trace?trace_id={t}" for t in traces),
        *(f"call?trace_id={t}" for t in every_trace),
        *(f"session?session_id={quote(p, safe='')}" for p in XSS),
        *(f"explain?window=24h&baseline=7d&by={by}" for by in ("model,feature", "service", "tenant", "user")),
        *(f"llmtap-calls?{var}={quote(p, safe='')}" for var in ("user", "search") for p in XSS[:2]),
    ]
    seen: set[str] = set()
    for fragment in fragments:
        page.evaluate(MARK)
        page.goto(f"http://127.0.0.1:{sc.admin}/#{fragment}")
        _settle(page, fragment)
        if fragment == fragments[0]:  # the board's auto-refresh off: each board is drawn by the step that opens it
            page.select_option("#refresh", "0")
        for sel in page.query_selector_all("select[data-var]"):
            values = sel.eval_on_selector_all("option", "os => os.map(o => o.value)")
            for value in values:
                if value in XSS:
                    with redrawn(page):
                        sel.select_option(value)
                    seen.add("dropdown")
        if fragment == "llmtap-calls":  # the explorer's text filters, typed in as a user would
            for box in page.query_selector_all("input[data-var]"):
                with redrawn(page):
                    box.fill(XSS[0])
                    box.press("Enter")
                assert page.evaluate(INJECTED) == INERT, (fragment, box.get_attribute("data-var"))
                with redrawn(page):
                    box.fill("")
                    box.press("Enter")
                seen.add("filter")
        text = page.inner_text("body")
        if any(p in text for p in XSS):
            seen.add(fragment.split("?", 1)[0])
        assert page.evaluate(INJECTED) == INERT, (fragment, page.evaluate(INJECTED))
    assert dialogs == []
    assert [e for e in errors if "Content Security Policy" in e] == []  # nothing was even tried against the CSP
    # the payloads were on every kind of page, as text
    assert {"dropdown", "filter", "llmtap-calls", "llmtap-trace", "call", "session", "explain"} <= seen, seen
    ctx.close()


def test_a_link_with_an_injected_trace_id_runs_no_attacker_sql(browser: Any, seeded_sidecar: Sidecar) -> None:
    """Finding 2: navigating to ``/#llmtap-trace?trace_id=<injection>`` ran the attacker's query (the CA key
    leaked into the page)."""
    from urllib.parse import quote

    ca = seeded_sidecar.data_dir / "ca" / "mitmproxy-ca.pem"
    key_line = next(x for x in ca.read_text().splitlines() if x and "-----" not in x)
    injection = f"' UNION ALL SELECT line, '', '', '', '', 0, 0, [], [], 0 FROM file('{ca}', 'LineAsString') --"
    with open_board(browser, seeded_sidecar, f"llmtap-trace?trace_id={quote(injection)}") as (page, _):
        text = page.inner_text("body")
        state = panel_states(page)[0]
    assert key_line not in text and "PRIVATE KEY" not in text
    assert state["state"] == "rendered" and state["empty"], state  # the value was compared as a value: no such span
