"""Upgrades lose nothing (issue 28): an earlier llmtap from this repository's history writes calls, today's
llmtap takes the same store over, and every old row reads back unchanged, new rows are complete, and nothing
in the log is an error. Embedded store (upgraded at start) and server store (``llmtap schema --apply``, then a
sidecar), the latter on the ClickHouse-HTTP endpoint over chDB, or on a real server when
``LLMTAP_TEST_CLICKHOUSE_URL`` is set (in a database of its own, dropped after).

The earlier releases run from ``git archive`` of their commit, with this checkout's virtualenv (their
dependencies are a subset of today's) and ``PYTHONPATH`` at their ``proxy/``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from helpers import ClickHouseHTTP, Mock, Sidecar, free_port, session_id, start_sidecar, stop

from llmtap.store.schema import _TABLE_RE, SCHEMA_VERSION, UPGRADED_TABLES, _columns, schema_statements
from llmtap.testing.harness import LLMTAP, wait_healthy

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
# The last commit of each earlier round: schema 1 (54 columns in llm_calls) and schema 2.
RELEASES = {
    "round1": "bf9702ff98dc2e51f115370b4a71dc62d1c4ad0b",
    "round2": "179df60f37bc1ba03b11b25ef3acbb8d069dff1e",
}
REAL_CH = os.environ.get("LLMTAP_TEST_CLICKHOUSE_URL", "")
LOG_ERRORS = re.compile(r"\b(ERROR|CRITICAL|Traceback)\b|WARNING (?!llmtap.drain)")


@dataclass
class Old:
    """An earlier release's tree, run with this virtualenv."""

    root: Path

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_") and not k.upper().endswith("_PROXY")}
        return {**env, "PYTHONPATH": str(self.root / "proxy")}

    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "llmtap", *args]


def old_release(name: str, into: Path) -> Old:
    commit = RELEASES[name]
    try:
        tar = subprocess.run(["git", "-C", str(REPO), "archive", commit, "proxy", "collector"], capture_output=True,
                             check=True, timeout=60).stdout  # fmt: skip
    except (subprocess.CalledProcessError, FileNotFoundError):
        if os.environ.get("CI"):
            raise
        pytest.skip(f"commit {commit[:7]} is not in this checkout (a shallow clone?)")
    into.mkdir(parents=True)
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    return Old(into)


def start_old(old: Old, data_dir: Path, mock: Mock, *extra: str) -> Sidecar:
    listen, admin = free_port(), free_port()
    args = old.cmd("run", "--listen", f"127.0.0.1:{listen}", "--admin", f"127.0.0.1:{admin}", "--data-dir",
                   str(data_dir), "--upstream-ca", str(mock.ca), "--connect-to",
                   f"api.openai.com:443:127.0.0.1:{mock.port}", *extra)  # fmt: skip
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir.parent / f"{data_dir.name}-old.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=old.env)
    sc = Sidecar(proc, listen, admin, data_dir, log)
    try:
        wait_healthy(sc)
    except Exception:
        stop(proc)
        raise
    return sc


def calls(sc: Sidecar, sessions: list[str]) -> list[dict[str, Any]]:
    """A plain call, a stream with usage and an embedding per session, through ``sc``; what the SDK received."""
    import ssl

    import openai

    ca = sc.bundle if sc.bundle.exists() else sc.data_dir / "ca" / "mitmproxy-ca-cert.pem"
    c = openai.OpenAI(api_key="sk-upgrade", max_retries=0, http_client=openai.DefaultHttpxClient(
        proxy=sc.proxy_url, verify=ssl.create_default_context(cafile=str(ca))))  # fmt: skip
    got = []
    for s in sessions:
        h = {"x-llmtap-session": s, "x-llmtap-feature": "upgrade"}
        r = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": s}], extra_headers=h)
        got.append({"session_id": s, "input_tokens": r.usage.prompt_tokens, "output_tokens": r.usage.completion_tokens})
        chunks = list(c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": s}],
                      stream=True, stream_options={"include_usage": True}, extra_headers=h))  # fmt: skip
        usage = chunks[-1].usage
        got.append({"session_id": s, "input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens})
        e = c.embeddings.create(model="text-embedding-3-small", input=s, extra_headers=h)
        got.append({"session_id": s, "input_tokens": e.usage.prompt_tokens, "output_tokens": 0})
    return got


def schema_columns(table: str) -> list[tuple[str, str]]:
    """(name, type) of ``table`` as today's collector/schema.sql declares them (the contract's order)."""
    for stmt in schema_statements():
        m = _TABLE_RE.match(stmt)
        if m and m.group(2) == table:
            out = []
            for c in _columns(m.group(3)):
                name, rest = c.split(None, 1)
                out.append((name, re.split(r"\s+(?:DEFAULT|CODEC|MATERIALIZED|ALIAS)\b", rest)[0].strip()))
            return out
    raise KeyError(table)


ROWS = "SELECT * FROM {db}.llm_calls WHERE feature = 'upgrade' ORDER BY session_id, api, stream"


def old_rows(old: Old, *store: str, db: str = "llmtap") -> list[dict[str, Any]]:
    """The rows as the earlier release reads them (its first release named the database in every query)."""
    # --admin '': the store itself, never a sidecar on the default admin port (the first release asked it first)
    r = subprocess.run(old.cmd("sql", ROWS.format(db=db), "--format", "JSONEachRow", "--admin", "", *store),
                       capture_output=True, text=True, timeout=120, env=old.env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines() if x.strip()]


def check_upgraded(
    sc: Sidecar, before: list[dict[str, Any]], old_sessions: list[str], sent: list[dict[str, Any]]
) -> None:
    """Old rows unchanged, new rows complete, the store at today's schema, the log clean."""
    after = sc.rows("feature = 'upgrade'", len(before) + len(sent), timeout=60)
    after = sorted(after, key=lambda r: (r["session_id"], r["api"], r["stream"]))
    assert len(after) == len(before) + len(sent)
    old_after = [r for r in after if r["session_id"] in old_sessions]
    assert len(before) == 3 * len(old_sessions)
    assert [{k: r[k] for k in b} for r, b in zip(old_after, before, strict=True)] == before  # every value kept
    described = [(d["name"], d["type"]) for d in sc.sql("DESCRIBE TABLE llm_calls")]
    assert described == schema_columns("llm_calls")  # every column of today's contract, in its order
    for table in UPGRADED_TABLES:
        have = {d["name"] for d in sc.sql(f"DESCRIBE TABLE {table}")}
        assert have == {n for n, _ in schema_columns(table)}, table
    new = [r for r in after if r["session_id"] not in old_sessions]
    assert set(new[0]) == {n for n, _ in schema_columns("llm_calls")}
    for r, want in zip(new, sorted(sent, key=lambda w: w["session_id"]), strict=False):
        assert r["session_id"] == want["session_id"] and r["outcome"] == "ok" and r["transport"] == "http"
        assert r["cost_usd"] is not None and r["cost_source"] == "genai-prices" and r["client_name"] == "openai-python"
    by_call = sorted((r["session_id"], r["input_tokens"], r["output_tokens"]) for r in new)
    assert by_call == sorted((w["session_id"], w["input_tokens"], w["output_tokens"]) for w in sent)
    hourly = sc.sql("SELECT sum(calls) AS n FROM llm_calls_hourly WHERE feature = 'upgrade'")
    assert int(hourly[0]["n"]) == len(after)  # the rollup's view took the old calls and takes the new ones
    log = sc.log.read_text()
    assert not [x for x in log.splitlines() if LOG_ERRORS.search(x)], log


def schema_version_of(store: str) -> int:
    """The version the store records (the admin API does not read llmtap_schema): its own engine, in a process."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "u = sys.argv[1]\n"
        "q = 'SELECT max(version) FROM llmtap.llmtap_schema'\n"
        "if u.startswith('chdb://'):\n"
        "    from llmtap.store.embedded import ChdbBackend\n"
        "    b = ChdbBackend(Path(u[7:]))\n"
        "    print(b.query(q, 'TSV').decode().strip()); b.close()\n"
        "else:\n"
        "    from llmtap.store.clickhouse import connect_client, parse_url\n"
        "    cfg = parse_url(u)\n"
        "    print(connect_client(cfg, None, 5, 30).command(q.replace('llmtap.', cfg['database'] + '.')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, store], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_an_embedded_store_of_an_earlier_release_is_upgraded_at_start(release: str, mock: Mock, tmp_path: Path) -> None:
    old = old_release(release, tmp_path / "old")
    data = tmp_path / "data"
    sc = start_old(old, data, mock)
    old_sessions = sorted(session_id() for _ in range(2))
    try:
        calls(sc, old_sessions)
    finally:
        stop(sc.proc)
    before = old_rows(old, "--data-dir", str(data))
    assert len(before) == 6
    sc = start_sidecar(data, mock)
    try:
        sent = calls(sc, [session_id() for _ in range(2)])
        check_upgraded(sc, before, old_sessions, sent)
    finally:
        stop(sc.proc)
    assert not [x for x in sc.log.read_text().splitlines() if LOG_ERRORS.search(x)]
    assert schema_version_of(f"chdb://{data / 'store'}") == SCHEMA_VERSION


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A ClickHouse server store's URL: the chDB endpoint, or a database of its own on the real server."""
    if REAL_CH:
        u = urlsplit(REAL_CH)
        db = f"llmtap_upgrade_{uuid.uuid4().hex[:8]}"
        yield urlunsplit((u.scheme, u.netloc, f"/{db}", u.query, ""))
        import clickhouse_connect

        client = clickhouse_connect.get_client(host=u.hostname, port=u.port or 8123, username=u.username or "default",
                                               password=u.password or "", secure=u.scheme == "clickhouses")  # fmt: skip
        client.command(f"DROP DATABASE IF EXISTS {db}")
        return
    ch = ClickHouseHTTP(tmp_path / "ch", 0).start()
    yield ch.url
    ch.stop()


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_a_server_store_of_an_earlier_release_is_upgraded_by_schema_apply(
    release: str, mock: Mock, server: str, tmp_path: Path
) -> None:
    old = old_release(release, tmp_path / "old")
    sc = start_old(old, tmp_path / "old-data", mock, "--store", server)
    old_sessions = sorted(session_id() for _ in range(2))
    try:
        calls(sc, old_sessions)
    finally:
        stop(sc.proc)
    before = old_rows(old, "--store", server, db=urlsplit(server).path.strip("/"))
    assert len(before) == 6
    r = subprocess.run([*LLMTAP, "schema", "--apply", "--store", server], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().endswith(f"upgraded to schema version {SCHEMA_VERSION}"), r.stderr
    again = subprocess.run([*LLMTAP, "schema", "--apply", "--store", server], capture_output=True, text=True,
                           timeout=120)  # fmt: skip
    assert again.returncode == 0 and "already at" in again.stderr, again.stderr
    sc = start_sidecar(tmp_path / "data", mock, "--store", server)
    try:
        sent = calls(sc, [session_id() for _ in range(2)])
        check_upgraded(sc, before, old_sessions, sent)
    finally:
        stop(sc.proc)
    assert schema_version_of(server) == SCHEMA_VERSION
