"""Issue 28's root cause: chDB hands what a failed query had already written to the next query on the same session,
as the start of its result. A read that failed half-way (cancelled, over a limit, an error in a later block) then
made the next answer two documents — the guard's parser read "Expecting property name enclosed in double
quotes" off a row cut mid-way, viewer panels answered 400. Every session llmtap keeps is replaced after a failure: the
next answer is exactly its own: the writer's session, the guard's parser, the test ClickHouse endpoint's sessions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llmtap.store.embedded import ChdbBackend
from llmtap.testing.harness import ClickHouseHTTP

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop

# Writes thousands of rows, then fails in a later block: what it wrote stays in the session's output.
FAILS_HALF_WAY = (
    "SELECT number, throwIf(number = 150000, 'boom') AS x FROM numbers(200000) SETTINGS max_block_size = 1000"
)


def test_chdb_keeps_a_failed_querys_output_for_the_next_query(tmp_path: Path) -> None:
    """The engine behaviour itself, on a bare chDB session in its own process (so this test fails, and the
    sessions below can stop being replaced, once chDB stops doing it)."""
    import subprocess
    import sys

    code = (
        "from chdb import session\n"
        f"s = session.Session({str(tmp_path / 'bare')!r})\n"
        "try:\n"
        f"    s.query({FAILS_HALF_WAY!r}, 'JSONEachRow')\n"
        "except Exception:\n"
        "    pass\n"
        "print(bytes(s.query('SELECT 1 AS one', 'JSONEachRow').bytes()).decode().splitlines()[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '{"number":0,"x":0}'  # the failed query's first row, not {"one":1}


def test_the_writers_session_answers_only_its_own_query_after_a_failure(inproc_store: ChdbBackend) -> None:
    with pytest.raises(Exception, match="boom"):
        inproc_store.query(FAILS_HALF_WAY)
    assert inproc_store.query("SELECT 1 AS one") == b'{"one":1}\n'


def test_the_guards_parser_answers_after_a_failed_parse(inproc_store: ChdbBackend) -> None:
    """(A read session whose query failed or was cancelled is closed: ``test_read_cancel.py``.)"""
    assert inproc_store.syntax_tree("DESCRIBE TABLE llm_calls") is None  # the engine refuses: its session goes
    assert inproc_store.canonical("select   1") == "SELECT 1"


@pytest.fixture
def chhttp(tmp_path: Path) -> Iterator[ClickHouseHTTP]:
    ch = ClickHouseHTTP(tmp_path / "ch", 0, read_user="reader", read_password="r3ad").start()
    yield ch
    ch.stop()


def test_the_test_endpoint_answers_only_its_own_query_after_a_failure(chhttp: ClickHouseHTTP) -> None:
    import clickhouse_connect

    clients = [
        chhttp.client(),
        clickhouse_connect.get_client(
            host="127.0.0.1", port=chhttp.port, username="reader", password="r3ad", compress=False
        ),
    ]
    for c in clients:
        with pytest.raises(Exception, match="boom"):
            c.raw_query(FAILS_HALF_WAY, fmt="JSONEachRow")
        assert bytes(c.raw_query("SELECT 1 AS one", fmt="JSONEachRow")) == b'{"one":1}\n'
