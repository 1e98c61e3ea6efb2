"""What a reader of the viewer sees, checked on the page as drawn: nothing overflows its panel, no two pieces of text
overlap, axes say what the data mean (whole-number ticks for counts, shares up to 100%, the selected range on the
time axis, distinct labels), legends account for every series, numbers in tables carry units, filter labels sit by
their boxes. :data:`CHECKS` runs in the page and returns the problems it found, one line each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

WIDTHS = (1280, 1920)
# Columns whose numbers identify rather than measure (no unit to show): an HTTP status, an attempt's number.
UNITLESS = ("status_code", "status", "attempt", "max_attempt", "#")

CHECKS = (Path(__file__).parent / "layout.js").read_text()


def settle(page: Any) -> None:
    """A board is drawn when every panel has a state; a page when it says so (and each of the explain sections)."""
    page.wait_for_function(
        "() => { const pg = document.getElementById('page');"
        " if (!pg.hidden) return ['rendered', 'error'].includes(pg.dataset.state)"
        "   && [...document.querySelectorAll('[data-section]')].every(s => s.dataset.state);"
        " const p = [...document.querySelectorAll('.panel')]; return p.length > 0 && p.every(x => x.dataset.state); }",
        timeout=180000,  # a busy machine: the explain page runs four analyses
    )


def problems(page: Any, uid: str, range_s: int = 86400) -> list[str]:
    return list(page.evaluate(CHECKS, {"uid": uid, "range": range_s, "unitless": list(UNITLESS)}))


def states(page: Any) -> list[str]:
    """Panels and page sections that did not render (their title and error)."""
    return list(
        page.evaluate(
            "() => [...document.querySelectorAll('.panel, [data-section], #page:not([hidden])')]"
            ".filter(e => e.dataset.state !== 'rendered')"
            ".map(e => `${e.querySelector('h2')?.textContent || e.dataset.section || 'page'}: ${e.dataset.state}"
            " ${e.querySelector('.error')?.textContent || ''}`)"
        )
    )


def screenshot(page: Any, where: Path, name: str, width: int) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"viewer-{name}-{width}.png"
    page.mouse.move(1, 1)  # no tooltip
    page.screenshot(path=str(path), full_page=True)
    return path
