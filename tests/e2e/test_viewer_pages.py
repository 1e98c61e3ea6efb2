"""The viewer's own pages and the calls explorer in a real browser (Debian's Chromium via Playwright) against a real
`llmtap run` on `llmtap seed --scenario explain` (plus random history): the explain page shows the CLI's numbers,
the call page reads a retried call at a glance, the session page adds up, the explorer filters, tooltips carry
values, units and the time zone, and a store that does not answer is one banner. Screenshots go to
$LLMTAP_SCREENSHOTS (docs/img)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import CHROMIUM, FLAGS, redrawn, sign_in
from helpers import LLMTAP, ClickHouseHTTP, Sidecar, free_port, start_sidecar, stop

from llmtap.testing.scenarios import AGENT_SESSION

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Debian's chromium: .ci/run installs it (apt-get install chromium)")
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(300)]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LLMTAP, *args], capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    data = tmp_path_factory.mktemp("pages") / "data"
    r = cli("seed", "--data-dir", str(data), "--calls", "6000", "--days", "8", "--scenario", "explain")
    assert r.returncode == 0, r.stderr
    s = start_sidecar(data, None, "--grafana-url", "https://grafana.example.com")
    yield s
    stop(s.proc)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def browser(chromium: Any, sc: Sidecar) -> Iterator[Any]:
    """Signed in to the viewer behind its token, the way a user is (a ``#token=`` link → the session cookie)."""
    ctx = sign_in(chromium, sc)
    yield ctx
    ctx.close()


OPEN: list[Any] = []  # the pages a test opened: closed when it ends, pass or fail (an open board refreshes every 30 s)


@pytest.fixture(autouse=True)
def _close_pages() -> Iterator[None]:
    yield
    while OPEN:
        page = OPEN.pop()
        if not page.is_closed():
            page.close()


def open_page(browser: Any, admin: int, fragment: str, height: int = 1000) -> tuple[Any, list[str]]:
    page = browser.new_page()
    OPEN.append(page)
    page.set_viewport_size({"width": 1500, "height": height})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"http://127.0.0.1:{admin}/#{fragment}")
    return page, errors


def wait_page(page: Any) -> None:
    page.wait_for_function("() => ['rendered', 'error'].includes(document.getElementById('page').dataset.state)",
                           timeout=60000)  # fmt: skip
    assert page.eval_on_selector("#page", "p => p.dataset.state") == "rendered", page.inner_text("#page")


def wait_panels(page: Any) -> None:
    page.wait_for_function(
        "() => { const p = [...document.querySelectorAll('.panel')];"
        " return p.length > 0 && p.every(x => x.dataset.state); }",
        timeout=60000,
    )


def shot(page: Any, name: str) -> None:
    where = os.environ.get("LLMTAP_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / f"viewer-{name}.png"), full_page=True)


def test_explain_page_shows_the_cli_numbers(browser: Any, sc: Sidecar) -> None:
    ask = ("--admin", f"127.0.0.1:{sc.admin}", "--data-dir", str(sc.data_dir))  # the token: <data-dir>/admin-token
    end = str(int(time.time()))  # one window for both (calls at its edges would move between two "now"s)
    r = cli("explain-cost", "--window", "24h", "--baseline", "7d", "--end", end, "--format", "json", *ask)
    assert r.returncode == 0, r.stderr
    want = json.loads(r.stdout)
    text = cli("explain-cost", "--window", "24h", "--baseline", "7d", "--end", end, *ask).stdout
    page, errors = open_page(browser, sc.admin, f"explain?window=24h&baseline=7d&by=model,feature&end={end}")
    wait_page(page)
    rows = page.eval_on_selector_all(
        "table[data-table=cost] tr[data-driver]",
        "trs => trs.map(t => ({driver: t.dataset.driver, key: t.dataset.key, delta: Number(t.dataset.delta),"
        " cells: [...t.children].map(c => c.textContent)}))",
    )
    assert len(rows) == min(len(want["drivers"]), 25)
    for got, d in zip(rows, want["drivers"], strict=False):
        assert (got["driver"], got["key"]) == (d["driver"], f"{d['key']['model']}/{d['key']['feature']}")
        assert got["delta"] == pytest.approx(d["delta_usd"], rel=1e-9, abs=1e-12)
    assert rows[0]["driver"] == "output_tokens_per_call" and rows[0]["key"].endswith("/summarize")
    assert "since prompt_version v7" in rows[0]["cells"]
    assert page.eval_on_selector("[data-section=cost]", "s => Number(s.dataset.delta)") == pytest.approx(
        want["delta_usd"], rel=1e-9
    )
    summary = text.splitlines()[1]  # "+$7.57 (+62%): … +$4.50; …": the same sentence as the CLI's
    assert summary in page.inner_text("[data-section=cost] pre")
    latency = page.inner_text("[data-section=latency]")
    assert "duration p95" in latency and "UTC" in latency
    assert errors == []
    page.close()


def _trace_of_retried_step(sc: Sidecar) -> dict[str, Any]:
    rows = sc.sql(
        f"SELECT trace_id, ttfb_ms, ttft_ms, decode_ms, duration_ms, request_model FROM llm_calls "
        f"WHERE session_id = '{AGENT_SESSION}' AND attempt = 2"
    )
    assert len(rows) == 1
    return rows[0]


def test_call_page_from_the_explorer(browser: Any, sc: Sidecar) -> None:
    call = _trace_of_retried_step(sc)
    page, errors = open_page(browser, sc.admin, f"llmtap-calls?session={AGENT_SESSION}")
    wait_panels(page)
    links = page.eval_on_selector_all(".panel table a[href^='#call']", "as => as.map(a => a.getAttribute('href'))")
    assert f"#call?trace_id={call['trace_id']}" in links  # every row of the explorer leads to its call page
    page.click(f".panel table a[href='#call?trace_id={call['trace_id']}']")
    wait_page(page)
    body = page.inner_text("#page")
    for needle in ("IDENTITY", "SHAPE", "OUTCOME", "TIMELINE", "ATTEMPTS OF THIS REQUEST", "IN ITS SESSION",
                   "claude-haiku-4-5", AGENT_SESSION, "claude-code 2.0.14", "tool_calls", "cache read"):  # fmt: skip
        assert needle in body, needle
    attempts = page.eval_on_selector_all(
        "[data-card='attempts of this request'] tr", "trs => trs.map(t => t.textContent)"
    )
    assert len(attempts) == 3 and "overloaded" in attempts[1] and "529" in attempts[1]  # header, the failure, this
    # the timeline is to scale: each segment's width is its share of the call's duration
    widths = page.eval_on_selector_all(
        "svg.timeline rect[data-segment]", "rs => rs.map(r => [r.dataset.segment, Number(r.getAttribute('width'))])"
    )
    total = sum(w for _, w in widths)
    seg = dict(widths)
    assert list(seg) == ["headers", "first content", "last content", "end"]
    assert seg["headers"] / total == pytest.approx(call["ttfb_ms"] / call["duration_ms"], abs=0.01)
    assert seg["last content"] / total == pytest.approx(call["decode_ms"] / call["duration_ms"], abs=0.01)
    grafana = page.get_attribute("a[target=_blank]", "href")
    assert grafana == f"https://grafana.example.com/d/llmtap-trace/llm-trace?var-trace_id={call['trace_id']}"
    page.hover("svg.timeline rect[data-segment=headers]")
    tip = page.inner_text("#tooltip")
    assert "TTFB" in tip and " ms" in tip
    assert errors == []
    page.mouse.move(1, 1)
    page.click(f"#page .links a[href='#session?session_id={AGENT_SESSION}']")
    wait_page(page)
    assert page.eval_on_selector("#page", "p => p.dataset.page") == "session"
    page.close()


def test_session_page_adds_up(browser: Any, sc: Sidecar) -> None:
    want = sc.sql(
        f"SELECT count() AS n, sum(cost_usd) AS cost, countIf(attempt > 1) AS retries, "
        f"countIf(cache_read_tokens > 0) AS hits FROM llm_calls WHERE session_id = '{AGENT_SESSION}'"
    )[0]
    page, errors = open_page(browser, sc.admin, f"session?session_id={AGENT_SESSION}")
    wait_page(page)
    rows = page.eval_on_selector_all(
        "table.session-calls tr[data-trace]", "trs => trs.map(t => [...t.children].map(c => c.textContent))"
    )
    assert len(rows) == int(want["n"]) == 13
    cache = [r[9] for r in rows]
    assert cache[0] == "miss: first_call" and "miss: ttl_expired" in cache and cache.count("hit") == int(want["hits"])
    total = page.eval_on_selector_all("td[data-col=cost_total]", "tds => tds.map(t => t.title)")[-1]
    assert float(total.removeprefix("$").removesuffix(" USD")) == pytest.approx(float(want["cost"]), rel=1e-5)
    assert rows[-1][11] == "$" + f"{float(want['cost']):.2g}"  # the running total ends at the session's cost
    tiles = dict(
        page.eval_on_selector_all(
            "[data-tile]", "ts => ts.map(t => [t.dataset.tile, t.querySelector('.tile-value').textContent])"
        )
    )
    assert tiles["calls"] == "13" and tiles["retries"] == str(want["retries"]) == "1" and tiles["errors"] == "1"
    assert tiles["cache hits / misses"] == f"{want['hits']} / 2"
    assert errors == []
    page.close()


def test_calls_explorer_filters_search_and_tooltips(browser: Any, sc: Sidecar) -> None:
    page, errors = open_page(browser, sc.admin, "llmtap-calls", height=1100)
    wait_panels(page)

    def column(name: str) -> list[str]:
        idx = page.eval_on_selector_all(".panel table th", "ths => ths.map(t => t.textContent)").index(name)
        return page.eval_on_selector_all(
            f".panel table tr td:nth-child({idx + 1})", "tds => tds.map(t => t.textContent)"
        )

    with redrawn(page):
        page.select_option("select[data-var=outcome]", "error")
    assert column("outcome") and set(column("outcome")) == {"error"}
    types = page.eval_on_selector("select[data-var=error_type]", "s => [...s.options].map(o => o.value)")
    assert "rate_limited" in types
    with redrawn(page):
        page.select_option("select[data-var=error_type]", "rate_limited")
    assert set(column("error_type")) == {"rate_limited"}
    with redrawn(page):
        page.select_option("select[data-var=outcome]", "$__all")
        page.select_option("select[data-var=error_type]", "$__all")
    with redrawn(page):
        page.select_option("select[data-var=tenant]", "globex")
    assert set(column("tenant")) == {"globex"}
    with redrawn(page):
        page.fill("input[data-var=user]", "user-7")
        page.press("input[data-var=user]", "Enter")
    assert column("user_id") and set(column("user_id")) == {"user-7"} and set(column("tenant")) == {"globex"}
    shot(page, "filters")
    with redrawn(page):
        page.select_option("select[data-var=tenant]", "$__all")
        page.fill("input[data-var=user]", "")
        page.press("input[data-var=user]", "Enter")
    rid = sc.sql("SELECT request_id FROM llm_calls WHERE request_id != '' ORDER BY timestamp DESC LIMIT 1")[0][
        "request_id"
    ]
    with redrawn(page):
        page.fill("input[data-var=request_id]", rid)
        page.press("input[data-var=request_id]", "Enter")
    assert column("request_id") == [rid]
    with redrawn(page):
        page.fill("input[data-var=request_id]", "")
        page.press("input[data-var=request_id]", "Enter")
        page.fill("input[data-var=search]", "synthetic overloaded")
        page.press("input[data-var=search]", "Enter")
    assert column("error_type") and set(column("error_type")) == {"overloaded"}
    assert errors == []
    page.close()
    # tooltips: the hovered time in UTC and each series' value with its unit; axes say UTC
    page, errors = open_page(browser, sc.admin, "llmtap-overview")
    wait_panels(page)
    chart = page.query_selector(".panel[data-type=timeseries] svg")
    assert any(
        "UTC" in t
        for t in page.eval_on_selector_all(".panel[data-type=timeseries] svg text", "ts => ts.map(t => t.textContent)")
    )
    box = chart.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.5)
    tip = page.inner_text("#tooltip")
    assert "UTC" in tip and "per second" in tip  # calls/s by provider, exact values with the unit
    stat = page.get_attribute(".panel[data-type=stat] .stat", "title")
    assert stat and stat.replace(",", "").isdigit()
    assert errors == []
    page.close()


@pytest.mark.parametrize("fragment, path", [("llmtap-overview", "/api/panel"), ("explain", "/api/explain")])
def test_a_store_that_goes_away_while_a_page_loads_loads_it_again_when_back(
    browser: Any, sc: Sidecar, fragment: str, path: str
) -> None:
    """/api/status said the store was up, then its reads answered 503 (the store went away in between: a loaded
    machine showed it): the banner comes, and when the next status check finds the store, the panels and the page
    load again by themselves (they stayed "waiting for the store" until a reload)."""
    page = browser.new_page()
    OPEN.append(page)
    page.set_viewport_size({"width": 1500, "height": 1000})
    failed: list[str] = []
    gone = json.dumps({"error": "store unreachable: it went away", "store_unreachable": True})

    def away(route: Any) -> None:
        if len(failed) < 40:  # every read of the first load
            failed.append(route.request.url)
            route.fulfill(status=503, content_type="application/json", body=gone)
        else:
            route.continue_()

    page.route(f"**{path}*", away)
    page.goto(f"http://127.0.0.1:{sc.admin}/#{fragment}")
    page.wait_for_selector("#banner:not([hidden])", timeout=30000)
    failed.extend(["x"] * 40)  # the store is back: every later read goes through
    page.wait_for_selector("#banner[hidden]", state="attached", timeout=30000)  # the next status check (5 s)
    if fragment == "explain":
        wait_page(page)
    else:
        page.wait_for_function(
            "() => [...document.querySelectorAll('.panel')].every(p => p.dataset.state === 'rendered')", timeout=60000
        )
    page.close()


def test_a_store_that_does_not_answer_is_one_banner(chromium: Any, tmp_path: Path) -> None:
    ch = ClickHouseHTTP(tmp_path / "ch", free_port()).start()
    r = cli("seed", "--store", ch.url, "--calls", "2000", "--days", "2")
    assert r.returncode == 0, r.stderr
    s = start_sidecar(tmp_path / "data", None, "--store", ch.url)
    browser = sign_in(chromium, s)
    try:
        ch.stop()
        t0 = time.monotonic()
        page, errors = open_page(browser, s.admin, "llmtap-overview")
        page.wait_for_selector("#banner:not([hidden])", timeout=15000)
        assert time.monotonic() - t0 < 8
        banner = page.inner_text("#banner")
        assert "Store unreachable" in banner and "statement" not in banner, banner  # the store is away, not the SQL
        panels = page.eval_on_selector_all(".panel", "ps => ps.length")
        assert panels > 0  # the board is there, waiting
        assert page.eval_on_selector_all(".panel .error", "es => es.length") == 0  # no exception text in panels
        assert all(
            t == "waiting for the store"
            for t in page.eval_on_selector_all(".panel .body", "bs => bs.map(b => b.textContent)")
        )
        shot(page, "store-down")
        ch.start()  # the store is back: the banner goes, the panels load
        page.wait_for_selector("#banner[hidden]", state="attached", timeout=30000)
        wait_panels(page)
        states = page.eval_on_selector_all(".panel", "ps => ps.map(p => p.dataset.state)")
        problems = page.eval_on_selector_all(".panel .error", "es => es.map(e => e.textContent)")[:2]
        assert set(states) == {"rendered"}, (states, problems)
        assert [e for e in errors if "503" not in e] == []
        page.close()
    finally:
        browser.close()
        stop(s.proc)
        ch.stop()


@pytest.mark.parametrize("fragment", ["explain", f"session?session_id={AGENT_SESSION}", "llmtap-overview"])
def test_without_the_cookie_the_viewer_asks_for_the_token(chromium: Any, sc: Sidecar, fragment: str) -> None:
    """Behind the token: a browser without the session cookie sees the login box (on a board or a page), a
    wrong token is refused, the right one sets an HttpOnly cookie and the page it asked for renders."""
    ctx = chromium.new_context(viewport={"width": 1500, "height": 1000})
    try:
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"http://127.0.0.1:{sc.admin}/#{fragment}")
        page.wait_for_selector("#login input[type=password]", state="visible", timeout=30000)
        assert page.eval_on_selector_all(".panel table tr, table[data-table] tr", "t => t.length") == 0  # no data
        page.fill("#login input", "not-the-token")
        page.click("#login button")
        page.wait_for_function("() => document.querySelector('#login .error').textContent === 'Wrong token.'")
        assert ctx.cookies() == []
        page.fill("#login input", sc.token)
        page.click("#login button")
        if fragment.startswith("llmtap-"):
            wait_panels(page)
            assert set(page.eval_on_selector_all(".panel", "ps => ps.map(p => p.dataset.state)")) == {"rendered"}
        else:
            wait_page(page)
        assert page.query_selector("#login") is None
        cookie = next(c for c in ctx.cookies() if c["name"] == "llmtap_admin")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and sc.token not in cookie["value"]
        assert page.evaluate("() => document.cookie") == ""  # not readable by scripts
        assert errors == []
    finally:
        ctx.close()
