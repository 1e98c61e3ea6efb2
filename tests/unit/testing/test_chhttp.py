"""The ClickHouse-HTTP stand-in runs each request with exactly the URL settings it sends, as a server does:
one request's settings never leak into the next, also now that a repeated setting is not set again."""

from __future__ import annotations

from pathlib import Path

import clickhouse_connect
import pytest

from llmtap.testing.harness import start_chhttp

pytestmark = pytest.mark.e2e  # runs the ClickHouse engine (chDB): with the e2e suite, off the fast unit loop


def test_each_request_runs_with_its_own_settings(tmp_path: Path) -> None:
    ch = start_chhttp(tmp_path / "ch", user="default", password="")
    try:
        c = clickhouse_connect.get_client(host="127.0.0.1", port=ch.port, username="default", password="")

        def threads(**settings: object) -> str:
            return str(c.command("SELECT getSetting('max_threads')", settings=settings or None))

        default = threads()
        assert threads(max_threads=1) == "1"
        assert threads(max_threads=1) == "1"  # the same again: already in force
        assert threads(max_threads=3) == "3"  # changed
        assert threads() == default  # gone from the request: back to the default
        assert threads(max_threads=1, max_block_size=1000) == "1"
        assert str(c.command("SELECT getSetting('max_block_size')")) != "1000"
        c.close()
    finally:
        ch.stop()
