"""The CLI contract: sql (admin API and offline store), ca, env, exposure refusals, admin endpoints."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
from pathlib import Path

import openai
import pytest
from helpers import LLMTAP, Sidecar, free_port, session_id, start_sidecar, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_")}
    e.update(env or {})
    return subprocess.run([*LLMTAP, *args], capture_output=True, text=True, timeout=60, env=e, cwd=cwd)


def admin_args(sc: Sidecar) -> list[str]:
    return ["--admin", f"127.0.0.1:{sc.admin}", "--data-dir", str(sc.data_dir)]


def post_sql(sc: Sidecar, query: str) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {sc.token}"}
    return sc.admin_request("POST", "/api/sql", json.dumps({"query": query}).encode(), headers)


def test_sql_through_the_admin_api(proxied: Sidecar) -> None:
    sid = session_id()
    openai.OpenAI(api_key="sk-x", max_retries=0).embeddings.create(
        model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-session": sid}
    )
    proxied.row(sid)
    r = cli(
        "sql",
        f"SELECT api, input_tokens FROM llm_calls WHERE session_id = '{sid}'",
        "--format",
        "JSONEachRow",
        "--admin",
        f"127.0.0.1:{proxied.admin}",
        "--data-dir",
        str(proxied.data_dir),  # where the install's admin token is: used without being asked for
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"api": "openai.embeddings", "input_tokens": 8}
    r = cli("sql", "SELECT count() FROM llm_calls", "--format", "CSV", *admin_args(proxied))
    assert r.returncode == 0 and int(r.stdout) >= 1


@pytest.mark.parametrize(
    "query",
    [
        "DROP TABLE llm_calls",
        "SELECT 1; DROP TABLE llm_calls",
        "INSERT INTO llm_calls (service) VALUES ('x')",
        "SELECT * FROM file('/etc/passwd', 'CSV')",
    ],
)
def test_sql_refuses_writes_via_cli_and_api(sidecar: Sidecar, query: str) -> None:
    r = cli("sql", query, *admin_args(sidecar))
    assert r.returncode == 2 and "refused" in r.stderr
    status, body = post_sql(sidecar, query)
    assert status == 403 and b"refused" in body
    assert sidecar.sql("SELECT count() AS n FROM llm_calls")[0]["n"] >= 0  # still there


def test_sql_bad_query_is_a_clear_error(sidecar: Sidecar) -> None:
    status, body = post_sql(sidecar, "SELECT nosuchcolumn FROM llm_calls")
    assert status == 400 and b"nosuchcolumn" in body


def test_sql_opens_the_store_when_no_sidecar_runs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert cli("seed", "--data-dir", str(data), "--calls", "5", "--days", "1").returncode == 0
    r = cli("sql", "SELECT count() FROM llm_calls", "--format", "CSV", "--data-dir", str(data))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "5"
    r = cli("sql", "DROP TABLE llm_calls", "--data-dir", str(data), "--admin", "")
    assert r.returncode == 2 and "refused" in r.stderr


def test_env_var_defaults(tmp_path: Path) -> None:
    assert cli("seed", "--data-dir", str(tmp_path / "d"), "--calls", "3", "--days", "1").returncode == 0
    r = cli("sql", "SELECT count() FROM llm_calls", "--format", "CSV", env={"LLMTAP_DATA_DIR": str(tmp_path / "d")})
    assert r.returncode == 0 and r.stdout.strip() == "3", r.stderr
    r = cli("sql", "SELECT 1", env={"LLMTAP_DATA_DIR": str(tmp_path / "typo")})
    assert r.returncode == 2 and "no llmtap store" in r.stderr
    assert not (tmp_path / "typo").exists()  # a mistyped data dir is not turned into an empty store


def test_ca_and_env(tmp_path: Path) -> None:
    r = cli("ca", "--data-dir", str(tmp_path / "d"))
    ca = Path(r.stdout.strip())
    assert r.returncode == 0 and ca.is_file() and b"BEGIN CERTIFICATE" in ca.read_bytes()
    r = cli("env", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:9999")
    assert r.returncode == 0
    lines = [line for line in r.stdout.splitlines() if line.startswith("export ") and "NODE_OPTIONS" not in line]
    exports = dict(line.removeprefix("export ").split("=", 1) for line in lines)
    assert exports["HTTPS_PROXY"] == "'http://127.0.0.1:9999'"
    bundle = Path(exports["SSL_CERT_FILE"].strip("'"))
    assert exports["REQUESTS_CA_BUNDLE"] == exports["NODE_EXTRA_CA_CERTS"] == exports["SSL_CERT_FILE"]
    text = bundle.read_text()
    assert ca.read_text().strip() in text and text.count("BEGIN CERTIFICATE") > 50  # system roots + llmtap CA


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--listen", "0.0.0.0:18089"], "--proxy-auth"),
        (["--admin", "0.0.0.0:18090"], "--admin-token"),
        (["--store", "mysql://x"], "unknown store URL"),
        (["--listen", "nonsense"], "HOST:PORT"),
        (["--connect-to", "a:b"], "--connect-to"),
    ],
)
def test_run_refuses_bad_or_unsafe_config(tmp_path: Path, args: list[str], needle: str) -> None:
    r = cli("run", "--data-dir", str(tmp_path / "d"), "--admin", f"127.0.0.1:{free_port()}", *args)
    assert r.returncode != 0 and needle in (r.stderr + r.stdout)


def test_healthz_and_metrics(proxied: Sidecar) -> None:
    sid = session_id()
    list(
        openai.OpenAI(api_key="sk-x", max_retries=0).chat.completions.create(
            model="gpt-4o",
            messages=[],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"x-llmtap-session": sid},
        )
    )
    proxied.row(sid)
    status, body = proxied.admin_request("GET", "/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, body = proxied.admin_request("GET", "/metrics")
    text = body.decode()
    assert status == 200
    assert 'llmtap_requests_total{error_type="",model="gpt-4o",operation="chat",outcome="ok",provider="openai"}' in text
    assert 'llmtap_tokens_total{model="gpt-4o",provider="openai",type="input"}' in text
    assert "llmtap_time_to_first_token_seconds_bucket" in text
    assert 'le="81.92"' in text
    assert "session" not in text and sid not in text  # no per-request labels
    status, body = proxied.admin_request("GET", "/")
    assert status == 200 and b"/js/main.js" in body


def test_sigterm_flushes_and_exits_cleanly(mock: object, tmp_path: Path) -> None:
    sc = start_sidecar(tmp_path / "data", mock)  # type: ignore[arg-type]
    try:
        c = openai.OpenAI(
            api_key="sk-x",
            max_retries=0,
            base_url="https://api.openai.com/v1",
            http_client=openai.DefaultHttpxClient(
                proxy=sc.proxy_url, verify=ssl.create_default_context(cafile=str(sc.bundle))
            ),
        )
        for _ in range(5):
            c.embeddings.create(model="text-embedding-3-small", input="x")
    finally:
        code = stop(sc.proc)
    assert code == 0
    r = cli(
        "sql",
        "SELECT count() FROM llm_calls",
        "--format",
        "CSV",
        "--data-dir",
        str(sc.data_dir),
        "--admin",
        "",
    )
    assert r.returncode == 0 and r.stdout.strip() == "5", r.stderr


def test_schema_command_prints_single_node_and_cluster_ddl() -> None:
    r = cli("schema", "--db", "otel")
    assert r.returncode == 0 and "CREATE TABLE IF NOT EXISTS otel.llm_calls (" in r.stdout
    assert "ON CLUSTER" not in r.stdout
    r = cli("schema", "--cluster", "prod")
    assert r.returncode == 0 and r.stdout.count("ON CLUSTER 'prod'") >= 10
    r = cli("schema", "--db", "bad;name")
    assert r.returncode == 2 and "invalid database name" in r.stderr
    r = cli("schema", "--apply", "--store", "chdb://x")
    assert r.returncode == 2 and "--apply needs" in r.stderr
