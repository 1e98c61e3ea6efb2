"""Every read path on the ClickHouse server store (``--store clickhouse://…/llmtap``, the form docs/deploy.md
documents): ``sql``, ``report``, ``check-cost`` (from the store and through the sidecar), every panel and
variable of every viewer dashboard, read back through llmtap's own commands.

Against llmtap.testing.chhttp (ClickHouse's HTTP interface over chDB, which, like a server, runs a request
without a ``database`` parameter in the user's default database), or against a real server when
LLMTAP_TEST_CLICKHOUSE_URL is set (clickhouse://user:pass@host:8123/db; the test works in a database of its
own, created and dropped).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from helpers import LLMTAP, ClickHouseHTTP, Mock, Sidecar, free_port, openai_client, session_id, start_sidecar, stop

from llmtap.admin.viewer import load_dashboards

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
REAL_CH = os.environ.get("LLMTAP_TEST_CLICKHOUSE_URL", "")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    # COLUMNS/LINES would size report's tables (pytest-xdist workers set COLUMNS=80): as wide as the rows need
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_") and k not in ("COLUMNS", "LINES")}
    return subprocess.run([*LLMTAP, *args], capture_output=True, text=True, timeout=120, env=env)


@dataclass
class Server:
    url: str
    sidecar: Sidecar
    sessions: dict[str, str]  # what was sent live → its session id
    seeded: int  # rows the seed wrote

    def sql(self, query: str, *via: str) -> list[dict[str, Any]]:
        r = cli("sql", query, "--format", "JSONEachRow", *(via or ("--store", self.url, "--admin", "")))
        assert r.returncode == 0, r.stderr
        return [json.loads(line) for line in r.stdout.splitlines()]

    @property
    def via_sidecar(self) -> tuple[str, ...]:
        return ("--admin", f"127.0.0.1:{self.sidecar.admin}", "--admin-token", self.sidecar.token)


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if REAL_CH:
        from urllib.parse import urlsplit, urlunsplit

        import clickhouse_connect

        from llmtap.store.clickhouse import parse_url

        db = f"llmtap_test_{secrets.token_hex(4)}"
        u = urlsplit(REAL_CH)
        cfg = parse_url(REAL_CH)
        yield urlunsplit((u.scheme, u.netloc, f"/{db}", u.query, ""))  # the same server and options, our database
        client = clickhouse_connect.get_client(
            host=cfg["host"], port=cfg["port"], username=cfg["username"], password=cfg["password"], secure=cfg["secure"]
        )
        client.command(f"DROP DATABASE IF EXISTS {db}")
        client.close()
        return
    ch = ClickHouseHTTP(tmp_path_factory.mktemp("ch") / "ch", free_port()).start()
    yield ch.url
    ch.stop()


@pytest.fixture(scope="module")
def server(store_url: str, mock: Mock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # a week of history with a cost regression on one feature in the last hour, written through llmtap's writer
    r = cli("seed", "--store", store_url, "--calls", "3000", "--days", "8", "--windows", "40",
            "--regression", "summarize:1.8")  # fmt: skip
    assert r.returncode == 0, r.stderr
    seeded = int(re.search(r"llmtap seed: (\d+) synthetic calls", r.stdout).group(1))  # type: ignore[union-attr]
    sc = start_sidecar(tmp_path_factory.mktemp("server-store") / "data", mock, "--store", store_url)
    sessions = {k: session_id() for k in ("stream", "anthropic", "rate_limited", "mid_stream", "unpriced")}
    try:
        c = openai_client(sc)
        list(
            c.chat.completions.create(
                model="gpt-4o",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                stream_options={"include_usage": True},
                extra_headers={"x-llmtap-session": sessions["stream"], "x-llmtap-tenant": "acme"},
            )
        )
        a = anthropic.Anthropic(
            api_key="sk-ant-x",
            max_retries=0,
            http_client=httpx2.Client(proxy=sc.proxy_url, verify=ssl.create_default_context(cafile=str(sc.bundle))),
        )
        a.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-llmtap-session": sessions["anthropic"]},
        )
        # a model no price source knows: the cost page's "Unpriced models" has a live row whatever the seed drew
        c.chat.completions.create(
            model="acme-unreleased-7",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-llmtap-session": sessions["unpriced"]},
        )
        with pytest.raises(openai.RateLimitError):
            c.chat.completions.create(
                model="gpt-4o",
                messages=[],
                extra_headers={"x-llmtap-session": sessions["rate_limited"], "x-mock-scenario": "rate_limit_429"},
            )
        with pytest.raises(openai.APIError):  # an error after the 200: every error panel has a live row
            list(
                c.chat.completions.create(
                    model="gpt-4o",
                    messages=[{"role": "user", "content": "hi"}],
                    stream=True,
                    extra_headers={"x-llmtap-session": sessions["mid_stream"], "x-mock-scenario": "mid_stream_error"},
                )
            )
        for sid in sessions.values():
            sc.row(sid, timeout=15)
        yield Server(store_url, sc, sessions, seeded)
    finally:
        stop(sc.proc)


def test_sql_reads_the_server_store_directly_and_through_the_sidecar(server: Server) -> None:
    q = (
        "SELECT session_id, provider, api, outcome, error_type, status_code, stream FROM llm_calls "
        "WHERE session_id IN ({})"
    )
    ids = ", ".join(f"'{s}'" for s in server.sessions.values())
    for via in ((), server.via_sidecar):
        rows = {r["session_id"]: r for r in server.sql(q.format(ids), *via)}
        s = server.sessions
        assert (rows[s["stream"]]["api"], rows[s["stream"]]["outcome"], rows[s["stream"]]["stream"]) == (
            "openai.chat_completions",
            "ok",
            True,
        )
        assert (rows[s["anthropic"]]["provider"], rows[s["anthropic"]]["api"]) == ("anthropic", "anthropic.messages")
        assert (rows[s["rate_limited"]]["status_code"], rows[s["rate_limited"]]["error_type"]) == (429, "rate_limited")
    # the store keeps what both writers wrote: the seeded history and the live calls
    n = server.sql("SELECT count() AS n FROM llm_calls")[0]["n"]
    assert n == server.seeded + len(server.sessions)


def test_report_reads_the_server_store(server: Server) -> None:
    def in_24h() -> int:
        # the LLM calls (api != ''), as the report counts them: the seeded history has other requests too
        q = "SELECT count() AS n FROM llm_calls WHERE api != '' AND timestamp >= now() - INTERVAL 86400 SECOND"
        return int(server.sql(q)[0]["n"])

    for via in (("--store", server.url, "--admin", ""), server.via_sidecar):
        before = in_24h()
        r = cli("report", "--since", "24h", *via)
        after = in_24h()  # nothing is written meanwhile; seeded calls only leave the 24 h as time passes
        assert r.returncode == 0, r.stderr
        assert "By model" in r.stdout and "claude-sonnet-4-5" in r.stdout and "rate_limited" in r.stdout
        assert any(f" {n} " in r.stdout for n in range(after, before + 1)), (before, after, r.stdout[:600])


def test_check_cost_reads_the_server_store(server: Server) -> None:
    for via in (("--store", server.url, "--admin", ""), server.via_sidecar):
        r = cli("check-cost", "--by", "feature", "--min-samples", "5", *via)
        assert r.returncode == 1, (r.stdout, r.stderr)
        regressed = [line for line in r.stdout.splitlines() if line.endswith("REGRESSION")]
        assert [line.split()[0] for line in regressed] == ["summarize"]


def _post(sc: Sidecar, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {sc.token}"}
    status, raw = sc.admin_request("POST", path, json.dumps(body).encode(), headers)
    return status, json.loads(raw)


def test_every_viewer_panel_and_variable_reads_the_server_store(server: Server) -> None:
    sc = server.sidecar
    trace_id = server.sql(f"SELECT trace_id FROM llm_calls WHERE session_id = '{server.sessions['stream']}'")[0][
        "trace_id"
    ]
    boards = load_dashboards()
    assert {"llmtap-overview", "llmtap-latency", "llmtap-cost", "llmtap-errors", "llmtap-calls"} <= set(boards)
    empty: list[tuple[str, int]] = []
    n_panels = 0
    for uid, board in boards.items():
        variables = [v for v in board.get("templating", {}).get("list", []) if v.get("type") == "query"]
        for var in variables:
            status, values = _post(sc, "/api/variable", {"uid": uid, "name": var["name"]})
            assert status == 200 and isinstance(values, list), (uid, var["name"], values)
        for panel in board["panels"]:
            if not panel.get("targets"):
                continue
            n_panels += 1
            req: dict[str, Any] = {"uid": uid, "panel": panel["id"]}
            if uid == "llmtap-trace":
                req["vars"] = {"trace_id": trace_id}
            status, frame = _post(sc, "/api/panel", req)
            assert status == 200 and "error" not in frame, (uid, panel.get("title"), frame)
            if not frame["rows"]:
                empty.append((uid, panel["id"]))
    assert n_panels >= 30
    # on a week of history plus live traffic every panel of the main boards has something to show
    assert [e for e in empty if e[0] in ("llmtap-overview", "llmtap-cost", "llmtap-errors", "llmtap-latency")] == []


def test_the_viewer_pages_and_explain_read_the_server_store(server: Server) -> None:
    """The call, session and explain pages of the viewer, through the sidecar, on the server route."""
    sc, sid = server.sidecar, server.sessions["stream"]
    trace_id = server.sql(f"SELECT trace_id FROM llm_calls WHERE session_id = '{sid}'")[0]["trace_id"]
    status, page = _post(sc, "/api/call", {"trace_id": trace_id})
    assert status == 200, page
    assert (page["call"]["trace_id"], page["call"]["session_id"], page["call"]["tenant"]) == (trace_id, sid, "acme")
    status, session = _post(sc, "/api/session", {"session_id": sid})
    assert status == 200 and [c["trace_id"] for c in session["calls"]] == [trace_id], session
    status, cost = _post(sc, "/api/explain-cost", {"window": "1h", "baseline": "7d", "by": ["feature"]})
    assert status == 200 and "summarize" in cost["text"], cost  # the regression the seed planted, in the last hour
    status, latency = _post(sc, "/api/explain-latency", {"metric": "duration", "quantile": "p95"})
    assert status == 200 and latency["text"], latency
