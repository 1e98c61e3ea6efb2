"""Issue #26, the admin's own doors: per-client login budgets where the right token always wins, sessions that a
logout ends, the token file kept private, ``/healthz`` quiet to a rebinding page, the reconcile key off argv.

The handler is driven directly (:class:`llmtap.admin.server.Admin` on :class:`llmtap.admin.httpd.Request`s,
each with its client's address), as the HTTP server calls it.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import pytest

from llmtap.admin.auth import AdminAuth, install_token
from llmtap.admin.httpd import Request, Response
from llmtap.admin.server import Admin, AdminState
from llmtap.cli.reconcile import admin_key
from llmtap.config import Environment
from llmtap.startup import StartupError
from llmtap.telemetry.metrics import Metrics

TOKEN = "t-" + "x" * 40


def admin(health: dict[str, Any] | None = None) -> Admin:
    state = AdminState(Metrics(), None, lambda: dict(health or {"status": "ok"}), AdminAuth(TOKEN))
    return Admin(state)


def login(a: Admin, token: str, peer: str) -> Response:
    headers = {"host": "127.0.0.1:9464", "content-type": "application/json"}
    return a(Request("POST", "/api/login", headers, json.dumps({"token": token}).encode(), peer=peer))


def cookie_of(resp: Response) -> str:
    return next(v for k, v in resp.headers if k == "Set-Cookie").split(";", 1)[0]


def session_status(a: Admin, cookie: str) -> bool:
    resp = a(Request("GET", "/api/session", {"host": "127.0.0.1:9464", "cookie": cookie}, peer="127.0.0.1"))
    return bool(json.loads(resp.body)["authenticated"])


def test_another_client_spending_its_budget_does_not_lock_the_login() -> None:
    """#26: one budget for everyone let any local process lock the browser login with wrong guesses."""
    a = admin()
    statuses = [login(a, "wrong", "10.0.0.7").status for _ in range(40)]
    assert statuses[:10] == [401] * 10 and set(statuses[10:]) == {429}  # the guesser's budget is spent
    assert login(a, "also-wrong", "10.0.0.8").status == 401  # another client has its own
    assert login(a, TOKEN, "127.0.0.1").status == 204


def test_the_right_token_always_wins_even_from_a_spent_address() -> None:
    """Every local process shares 127.0.0.1: a wrong-token flood from there must not refuse the operator."""
    a = admin()
    for _ in range(40):
        login(a, "wrong", "127.0.0.1")
    assert login(a, "wrong", "127.0.0.1").status == 429
    assert login(a, TOKEN, "127.0.0.1").status == 204
    bearer = {"host": "127.0.0.1:9464", "authorization": f"Bearer {TOKEN}"}
    assert a(Request("GET", "/api/session", bearer, peer="127.0.0.1")).status == 200
    wrong = {"host": "127.0.0.1:9464", "authorization": "Bearer nope"}
    assert a(Request("GET", "/api/session", wrong, peer="127.0.0.1")).status == 429  # wrong bearers spend it too


def test_logout_ends_the_session() -> None:
    """#26: the cookie was derived from the token, so logging out could not revoke it."""
    a = admin()
    first, second = cookie_of(login(a, TOKEN, "127.0.0.1")), cookie_of(login(a, TOKEN, "127.0.0.1"))
    assert first != second and session_status(a, first) and session_status(a, second)
    assert TOKEN not in first
    out = a(Request("POST", "/api/logout", {"host": "127.0.0.1:9464", "cookie": first}, peer="127.0.0.1"))
    assert out.status == 204
    assert not session_status(a, first)  # that cookie is worthless now, wherever it was copied to
    assert session_status(a, second)  # another browser's session goes on


def test_an_existing_token_file_readable_by_others_is_made_private(tmp_path: Path) -> None:
    """#26: an ``admin-token`` created (or copied) with mode 0644 stayed 0644."""
    path = tmp_path / "admin-token"
    path.write_text("existing-token\n")
    path.chmod(0o644)
    assert install_token(tmp_path) == "existing-token"
    assert path.stat().st_mode & 0o777 == 0o600
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert len(install_token(fresh)) >= 40 and (fresh / "admin-token").stat().st_mode & 0o777 == 0o600


def test_a_token_file_that_is_not_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("x\n")
    os.symlink(tmp_path / "elsewhere", tmp_path / "admin-token")
    with pytest.raises(StartupError, match="not a regular file"):
        install_token(tmp_path)


def test_healthz_names_nothing_internal_to_a_rebinding_page() -> None:
    """#26: ``/healthz`` answered any Host, naming the internal ClickHouse host in ``store_error``."""
    health = {"status": "ok", "store_ok": False, "store_error": "store_unavailable: ch-internal.corp:8123 refused"}
    a = admin(health)
    probe = a(Request("GET", "/healthz", {"host": "evil.example:9464"}, peer="127.0.0.1"))
    assert probe.status == 200 and json.loads(probe.body) == {"status": "ok"}
    local = a(Request("GET", "/healthz", {"host": "127.0.0.1:9464"}, peer="127.0.0.1"))
    assert json.loads(local.body)["store_error"].startswith("store_unavailable")
    named = {"host": "evil.example:9464", "authorization": f"Bearer {TOKEN}"}
    assert "store_error" in json.loads(a(Request("GET", "/healthz", named, peer="127.0.0.1")).body)
    down = admin({"status": "draining", "store_error": "x"})
    assert down(Request("GET", "/healthz", {"host": "pod.svc:9464"}, peer="10.0.0.1")).status == 503


def _args(**kw: str) -> argparse.Namespace:
    return argparse.Namespace(**{"admin_key": "", "admin_key_file": "", **kw})


def test_the_reconcile_admin_key_comes_from_a_file_or_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """#26: ``reconcile --admin-key KEY`` was the documented form (every local user sees it in ``ps``)."""
    key = tmp_path / "key"
    key.write_text("sk-admin-from-file\n")
    assert admin_key(_args(admin_key_file=str(key)), Environment.of({})) == "sk-admin-from-file"
    env = Environment.of({"LLMTAP_ADMIN_KEY": "sk-admin-from-env"})
    assert admin_key(_args(admin_key="sk-admin-from-env"), env) == "sk-admin-from-env"  # the env's default
    assert capsys.readouterr().err == ""
    assert admin_key(_args(admin_key="sk-admin-on-argv"), env) == "sk-admin-on-argv"
    assert "visible to every local user" in capsys.readouterr().err
