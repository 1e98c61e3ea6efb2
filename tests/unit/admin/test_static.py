"""``/js/<path>``: the viewer's modules under ``static/js`` and nothing else — not a file beside them, not one a
symlink or a ``..`` leads to."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmtap.admin import server


@pytest.fixture
def js(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    static = tmp_path / "static"
    (static / "js" / "pages").mkdir(parents=True)
    (static / "js" / "main.js").write_text("import './pages/call.js';")
    (static / "js" / "pages" / "call.js").write_text("export {};")
    (static / "secret.js").write_text("secret")
    (tmp_path / "outside.js").write_text("secret")
    (static / "js" / "link.js").symlink_to(tmp_path / "outside.js")
    (static / "js" / "dir.js").symlink_to(static)
    monkeypatch.setattr(server, "STATIC_JS", static / "js")
    return static / "js"


def test_modules_are_served(js: Path) -> None:
    assert server._module("/js/main.js") == (js / "main.js").resolve()
    assert server._module("/js/pages/call.js") == (js / "pages" / "call.js").resolve()


@pytest.mark.parametrize(
    "path",
    [
        "/js/../secret.js",
        "/js/pages/../../secret.js",
        "/js/./../secret.js",
        "/js/..%2fsecret.js",
        "/js/%2e%2e/secret.js",
        "/js/..\\secret.js",
        "/js//tmp/outside.js",
        "/js/link.js",  # a symlink out of static/js
        "/js/dir.js/secret.js",
        "/js/main.js.map",
        "/js/pages",
        "/js/",
        "/js/missing.js",
    ],
)
def test_nothing_outside_static_js(js: Path, path: str) -> None:
    assert server._module(path) is None
