"""The read commands answer from exactly the store they are asked for, and say when there is nothing to read.

- ``--data-dir X`` reads X: through the sidecar running on X (found by its lock), else X's store,
  never a sidecar that happens to answer on the default admin port, and never an empty store made
  up for a mistyped path.
- ``check-cost`` does not pass a gate on nothing: exit 3 and a message, ``--allow-empty`` to pass.
- ``/healthz`` does not claim ``store_ok`` before the first write; ``report`` is not cut to 80 columns.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from helpers import LLMTAP, Mock, Sidecar, openai_client, session_id, start_sidecar, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
DEFAULT_ADMIN_PORT = 9464  # llmtap's documented default (cli/parser.py DEFAULT_ADMIN)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_")}
    e.update(env or {})
    return subprocess.run([*LLMTAP, *args], capture_output=True, text=True, timeout=90, env=e)


def seed(data: Path, calls: int, *extra: str) -> None:
    r = cli("seed", "--data-dir", str(data), "--calls", str(calls), "--days", "1", *extra)
    assert r.returncode == 0, r.stderr


def count(*args: str) -> int:
    r = cli("sql", "SELECT count() FROM llm_calls", "--format", "CSV", *args)
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture
def on_default_admin(mock: Mock, tmp_path: Path) -> Iterator[Sidecar]:
    """A sidecar with its own data dir that answers on the default admin address."""
    if not port_free(DEFAULT_ADMIN_PORT):
        pytest.skip(f"127.0.0.1:{DEFAULT_ADMIN_PORT} is taken on this machine")
    sc = start_sidecar(tmp_path / "other", mock, admin_port=DEFAULT_ADMIN_PORT)
    c = openai_client(sc)
    for _ in range(3):
        c.embeddings.create(model="text-embedding-3-small", input="x")
    sc.rows("1=1", 3)
    yield sc
    stop(sc.proc)


def test_an_explicit_data_dir_is_read_even_when_another_sidecar_answers_on_the_default_admin_port(
    on_default_admin: Sidecar, tmp_path: Path
) -> None:
    mine = tmp_path / "mine"
    seed(mine, 7)
    assert count("--data-dir", str(mine)) == 7  # not the 3 calls of the sidecar on :9464
    assert count("--data-dir", str(on_default_admin.data_dir)) == 3  # that one's own data dir: through it
    r = cli("check-cost", "--data-dir", str(mine), "--window", "1d", "--baseline", "1d", "--min-samples", "1")
    assert "7" in r.stdout or "nothing to compare" in r.stderr  # computed on mine, not on the other store
    # an explicit --admin is used, but not for another store than the one asked for
    r = cli("sql", "SELECT 1", "--admin", f"127.0.0.1:{DEFAULT_ADMIN_PORT}", "--data-dir", str(mine))
    assert r.returncode == 2 and "serves another store" in r.stderr
    r = cli("sql", "SELECT 1", "--admin", f"127.0.0.1:{DEFAULT_ADMIN_PORT}")  # no token: this install's is not its
    assert r.returncode == 2 and "wants its admin token" in r.stderr, r.stderr
    assert count("--admin", f"127.0.0.1:{DEFAULT_ADMIN_PORT}", "--admin-token", on_default_admin.token) == 3


def test_the_sidecar_running_on_a_data_dir_answers_for_it(proxied: Sidecar) -> None:
    """The running sidecar holds its store (chDB: one process); the CLI finds it through the data dir's lock,
    and sees a call the store writer has not flushed yet (the admin query flushes first)."""
    sid = session_id()
    openai.OpenAI(api_key="sk-x", max_retries=0).embeddings.create(
        model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-session": sid}
    )
    r = cli("sql", f"SELECT count() FROM llm_calls WHERE session_id = '{sid}'", "--format", "CSV",
            "--data-dir", str(proxied.data_dir))  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == "1", r.stderr


@pytest.mark.parametrize("command", [["sql", "SELECT 1"], ["report"], ["check-cost"]])
def test_a_data_dir_without_a_store_is_refused_not_created(command: list[str], tmp_path: Path) -> None:
    typo = tmp_path / "llmtap-dat"
    r = cli(*command, "--data-dir", str(typo))
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert f"--data-dir {typo}" in line and "no llmtap store" in line
    assert not typo.exists()
    r = cli(*command, "--store", f"chdb://{typo}/store")
    assert r.returncode == 2 and "--store" in r.stderr and not typo.exists()


def test_check_cost_does_not_pass_on_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    seed(empty, 0)  # a store with no calls
    r = cli("check-cost", "--data-dir", str(empty))
    assert r.returncode == 3 and "nothing to compare (no calls at all)" in r.stderr and "--allow-empty" in r.stderr
    assert cli("check-cost", "--data-dir", str(empty), "--allow-empty").returncode == 0
    fresh = tmp_path / "fresh"  # a day of traffic, no earlier days: no baseline
    seed(fresh, 400, "--days", "0.04")
    r = cli("check-cost", "--data-dir", str(fresh), "--min-samples", "5")
    assert r.returncode == 3 and "no baseline" in r.stderr, r.stderr
    steady = tmp_path / "steady"  # the same traffic in the window and in each baseline window: a pass
    seed(steady, 0, "--windows", "40", "--days", "7")
    r = cli("check-cost", "--data-dir", str(steady), "--by", "feature", "--min-samples", "5")
    assert r.returncode == 0 and "REGRESSION" not in r.stdout and "summarize" in r.stdout, r.stderr
    regressed = tmp_path / "regressed"
    seed(regressed, 0, "--windows", "40", "--days", "7", "--regression", "summarize:1.8")
    r = cli("check-cost", "--data-dir", str(regressed), "--by", "feature", "--min-samples", "5")
    assert r.returncode == 1 and "REGRESSION" in r.stdout and "summarize" in r.stdout


def test_healthz_says_store_ok_only_after_a_write(mock: Mock, tmp_path: Path) -> None:
    sc = start_sidecar(tmp_path / "data", mock)
    try:
        status, body = sc.admin_request("GET", "/healthz")
        h = json.loads(body)
        assert status == 200 and h["store_ok"] is None and h["records_written"] == 0
        openai_client(sc).embeddings.create(model="text-embedding-3-small", input="x")
        sc.rows("1=1", 1)
        h = json.loads(sc.admin_request("GET", "/healthz")[1])
        assert h["store_ok"] is True and h["records_written"] == 1
    finally:
        stop(sc.proc)


def test_report_is_not_cut_to_80_columns_off_a_terminal(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed(data, 300)
    r = cli("report", "--data-dir", str(data), env={"COLUMNS": ""})
    assert r.returncode == 0, r.stderr
    header = next(line for line in r.stdout.splitlines() if "ttft_p95_ms" in line)
    for col in ("provider", "model", "calls", "cost_usd", "input", "output", "ttft_p95_ms", "error_rate"):
        assert col in header  # every column of the table on one line, names whole
    assert "…" not in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) > 80
