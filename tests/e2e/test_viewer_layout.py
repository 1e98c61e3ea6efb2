"""The viewer as a reader sees it, on every board and page at 1280 and 1920 px, with the demo's data (its week of
history and live calls through a real sidecar to the mock provider) and with a nearly empty store: nothing
overflows its panel, no two labels overlap, axes say what the data mean, tables carry units and lead with the
call link, the explain page opens on the demo's planted regression; the demo's live calls look like real ones.
With $LLMTAP_SCREENSHOTS (docs/img) each page of the demo's store is saved as viewer-<page>-<width>.png."""

from __future__ import annotations

import concurrent.futures
import os
import random
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from browser import CHROMIUM, FLAGS, sign_in
from helpers import Mock, Sidecar, start_mock, start_sidecar, stop
from layout import WIDTHS, problems, screenshot, settle, states

from llmtap.testing import demo

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Debian's chromium: .ci/run installs it (apt-get install chromium)")
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(600)]

SYNTHETIC_KEYS = "('a1b2c3d4e5f60718', '9f8e7d6c5b4a3921')"  # the seeded history's api_key_id values
LIVE = f"api_key_id NOT IN {SYNTHETIC_KEYS} AND api != ''"  # the live calls (the history's other requests have no key)
BOARDS = ["overview", "latency", "cost", "errors", "agents", "calls"]  # "calls": the calls explorer
PAGES = [*BOARDS, "trace", "call", "session", "explain"]


@dataclass
class Store:
    name: str
    sc: Sidecar
    trace_id: str  # the call page's call: the live stream whose labels crowd the most
    session_id: str

    def fragment(self, page: str) -> str:
        if page in BOARDS:
            return f"llmtap-{page}"
        return {
            "trace": f"llmtap-trace?trace_id={self.trace_id}",
            "call": f"call?trace_id={self.trace_id}",
            "session": f"session?session_id={quote(self.session_id, safe='')}",
            "explain": "explain",
        }[page]


Viewer = Callable[[str, int], tuple[Any, "Store"]]


def live_calls(sc: Sidecar, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` of the demo's live calls (its own code: scenarios, sizes, headers), eight at a time, and their rows."""
    opener = demo._opener(sc.proxy_url, sc.bundle)
    rnd = random.Random(seed)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda r: demo.one_call(opener, r), [random.Random(rnd.random()) for _ in range(n)]))
    rows = sc.rows(LIVE, n, timeout=60)
    assert len(rows) == n, len(rows)
    return rows


def crowded(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The live stream whose timeline marks and token-gap labels sit closest together (a short call)."""
    streams = [r for r in rows if r["ttft_ms"] is not None and r["itl_p50_ms"] is not None and r["outcome"] == "ok"]
    return min(streams, key=lambda r: (r["duration_ms"] - r["ttft_ms"]) / r["duration_ms"])


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mock]:
    m = start_mock(tmp_path_factory.mktemp("layout-mock"))
    yield m
    stop(m.proc)


@pytest.fixture(scope="module")
def demo_store(mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    data = tmp_path_factory.mktemp("layout-demo") / "data"
    seed = "import sys, pathlib; from llmtap.testing.demo import seed_history; seed_history(pathlib.Path(sys.argv[1]))"
    r = subprocess.run([sys.executable, "-c", seed, str(data)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr  # in its own process: chDB holds one store per process
    sc = start_sidecar(data, mock, service="demo-app")
    try:
        rows = live_calls(sc, 40, seed=29)
        session = sc.sql(
            f"SELECT session_id, count() AS n FROM llm_calls WHERE api_key_id IN {SYNTHETIC_KEYS}"
            " AND timestamp > now() - INTERVAL 1 DAY GROUP BY session_id ORDER BY n DESC LIMIT 1"
        )[0]["session_id"]
        yield Store("demo", sc, crowded(rows)["trace_id"], session)
    finally:
        stop(sc.proc)


@pytest.fixture(scope="module")
def empty_store(mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    sc = start_sidecar(tmp_path_factory.mktemp("layout-empty") / "data", mock)
    try:
        rows = live_calls(sc, 2, seed=7)
        call = next((r for r in rows if r["outcome"] == "ok"), rows[0])
        yield Store("nearly-empty", sc, call["trace_id"], call["session_id"])
    finally:
        stop(sc.proc)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def viewer(chromium: Any, demo_store: Store, empty_store: Store) -> Iterator[Viewer]:
    """A signed-in browser context per store and width, made once."""
    stores = {s.name: s for s in (demo_store, empty_store)}
    contexts: dict[tuple[str, int], Any] = {}

    def get(store: str, width: int) -> tuple[Any, Store]:
        if (store, width) not in contexts:
            contexts[store, width] = sign_in(chromium, stores[store].sc, width=width, height=1000)
        return contexts[store, width], stores[store]

    yield get
    for ctx in contexts.values():
        ctx.close()


def open_page(viewer: Viewer, store: str, width: int, page_name: str) -> tuple[Any, list[str]]:
    ctx, s = viewer(store, width)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    failed: list[Any] = []
    page.on("response", lambda r: failed.append(r) if r.status >= 400 else None)
    page.goto(f"http://127.0.0.1:{s.sc.admin}/#{s.fragment(page_name)}")
    settle(page)
    for r in failed:  # what the server said, next to the browser's bare "Failed to load resource"
        errors.append(f"{r.status} {r.request.method} {r.url} {r.request.post_data}: {r.text()[:300]}")
    return page, errors


# the demo's data at both widths (the screenshots); the nearly empty store at the narrower one
CASES = [("demo", w) for w in WIDTHS] + [("nearly-empty", WIDTHS[0])]


@pytest.mark.parametrize("page_name", PAGES)
@pytest.mark.parametrize(("store", "width"), CASES)
def test_layout(viewer: Viewer, store: str, page_name: str, width: int) -> None:
    page, errors = open_page(viewer, store, width, page_name)
    try:
        assert states(page) == []
        uid = f"llmtap-{page_name}" if page_name in (*BOARDS, "trace") else ""
        assert problems(page, uid) == []
        assert errors == []
        shots = os.environ.get("LLMTAP_SCREENSHOTS")
        if shots and store == "demo":
            screenshot(page, Path(shots), page_name, width)
    finally:
        page.close()


def test_the_explorer_leads_with_the_call_link(viewer: Viewer) -> None:
    page, _ = open_page(viewer, "demo", WIDTHS[0], "calls")
    try:
        first = page.eval_on_selector(".panel table tr th", "th => th.textContent")
        assert first == "trace_id"
        inside = page.evaluate(
            "() => { const a = document.querySelector('.panel table tr td a[href^=\"#call\"]').getBoundingClientRect();"
            " const p = document.querySelector('.panel').getBoundingClientRect();"
            " return a.left >= p.left && a.right <= p.right && a.width > 0; }"
        )
        assert inside  # the link to the call page is on screen without scrolling
    finally:
        page.close()


def test_explain_opens_on_the_planted_regression(viewer: Viewer) -> None:
    page, _ = open_page(viewer, "demo", WIDTHS[0], "explain")
    try:
        pressed = page.eval_on_selector("[data-explain=window] button[aria-pressed=true]", "b => b.dataset.window")
        assert pressed == "1h"  # the demo plants its regression in the last hour: 24h would dilute it
        assert "summarize" in page.eval_on_selector("table[data-table=cost] tr[data-driver]", "t => t.dataset.key")
        assert "moved the most" in page.inner_text("[data-note=window]")
        page.click("[data-explain=window] button[data-window='24h']")  # the control: one click to another window
        page.wait_for_function("() => location.hash.includes('window=24h')")
        settle(page)
        assert (
            page.eval_on_selector("[data-explain=window] button[aria-pressed=true]", "b => b.dataset.window") == "24h"
        )
    finally:
        page.close()
    page, _ = open_page(viewer, "nearly-empty", WIDTHS[0], "explain")
    try:  # nothing moved: the whole day, and the note says why
        assert (
            page.eval_on_selector("[data-explain=window] button[aria-pressed=true]", "b => b.dataset.window") == "24h"
        )
    finally:
        page.close()


def test_the_demo_live_calls_and_sessions_look_real(demo_store: Store) -> None:
    sc = demo_store.sc
    live = sc.sql(
        f"SELECT request_id, response_id, client_name, provider, api, outcome, output_tokens, stream, session_id"
        f" FROM llm_calls WHERE {LIVE}"
    )
    assert len({r["request_id"] for r in live}) == len(live)  # each call its own request id
    responses = [r["response_id"] for r in live if r["response_id"]]
    assert responses and len(set(responses)) == len(responses)
    assert all(r["client_name"] in ("openai-python", "anthropic-python") for r in live)
    assert all(r["session_id"] for r in live)
    claude = [r for r in live if r["provider"] == "anthropic" and r["outcome"] == "ok"]
    assert claude and min(r["output_tokens"] for r in claude) >= 20  # sized like the history's (mean 200-400)
    sessions = sc.sql(
        f"SELECT session_id, count() AS n, dateDiff('second', min(timestamp), max(timestamp)) AS span"
        f" FROM llm_calls WHERE api_key_id IN {SYNTHETIC_KEYS} AND session_id != '' GROUP BY session_id"
    )
    calls = [int(s["n"]) for s in sessions]
    assert 3 <= statistics.median(calls) <= 40 and max(calls) < 150, (statistics.median(calls), max(calls))
    assert max(int(s["span"]) for s in sessions) <= 2 * 3600 + 300  # a session is an afternoon's run, not 8 days
