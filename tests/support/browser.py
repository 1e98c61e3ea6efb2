"""The viewer's browser tests: Debian's Chromium driven by Playwright, signed in the way a user is."""

from __future__ import annotations

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
