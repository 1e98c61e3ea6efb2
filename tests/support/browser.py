"""The viewer's browser tests: Debian's Chromium driven by Playwright, signed in the way a user is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from helpers import Sidecar

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


def sign_in(chromium: Any, sc: Sidecar, width: int = 1500, height: int = 1000) -> Any:
    """A browser context holding the viewer's session cookie: opened from a ``#token=`` link carrying the
    install's token (the page exchanges it for the cookie and drops it from the address bar)."""
    ctx = chromium.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.goto(f"http://127.0.0.1:{sc.admin}/#token={sc.token}")
    page.wait_for_function("() => !location.hash.startsWith('#token=')")
    page.wait_for_function("() => document.querySelectorAll('#login').length === 0 && document.querySelector('nav a')")
    cookies = ctx.cookies()
    assert any(c["name"] == "llmtap_admin" and c["httpOnly"] for c in cookies), cookies
    page.close()
    return ctx


# What the page shows before a step (its panels, the content of its own page) is marked, so that the wait after the
# step is for what the step draws and not for what it replaces: a board's panels are drawn anew on every load (a
# hash change, a variable, the range), a page's content on every visit. No fixed sleep stands in for the redraw.
MARK = "() => document.querySelectorAll('.panel, #page > *').forEach(e => { e.llmtapStale = true; })"
PANELS_DRAWN = (
    "() => { const p = [...document.querySelectorAll('.panel')];"
    " return p.length > 0 && p.every(x => x.dataset.state && !x.llmtapStale); }"
)


def page_drawn(name: str = "") -> str:
    """The expression true once the viewer's own page (``name``: any when empty) has finished its new visit."""
    kind = f"pg.dataset.page === '{name}' && " if name else ""
    return (
        "() => { const pg = document.getElementById('page');"
        f" return !pg.hidden && {kind}['rendered', 'error'].includes(pg.dataset.state)"
        " && pg.children.length > 0 && ![...pg.children].some(c => c.llmtapStale); }"
    )


@contextmanager
def redrawn(page: Any, timeout: int = 60000) -> Iterator[None]:
    """The board's panels the step inside draws (a variable, the range, a text filter), every one with a state."""
    page.evaluate(MARK)
    yield
    page.wait_for_function(PANELS_DRAWN, timeout=timeout)


@contextmanager
def opened(ctx: Any, errors: list[str] | None = None) -> Iterator[Any]:
    """A page of ``ctx``, closed when the step is done, pass or fail: an open board keeps its refresh timer (every
    panel queried again every 30 s) for as long as its page lives. Console errors and page errors go to ``errors``."""
    page = ctx.new_page()
    if errors is not None:
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        yield page
    finally:
        page.close()
