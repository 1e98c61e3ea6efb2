"""The coding agents' own binaries under ``llmtap exec``, against the mock provider (issue #31).

Claude Code, Codex CLI and Gemini CLI, at the versions pinned in ``tests/agents/package.json`` (with its lock),
are installed from the npm registry into ``tests/.tools/agents`` (``npm ci --ignore-scripts``; kept while the
versions match). Where the registry cannot be reached the tests skip, saying so — except in CI (``CI`` set),
where they fail. Each runs one short non-interactive prompt through a real ``llmtap run`` (the session
sidecar, which dials the mock for the providers' hosts): the agent must print the mock's answer, and llmtap
must write one LLM row per model call the mock received, with the mock's usage, the agent's session, client
name and version, billing and the ``--service`` given.

The agents' other requests (telemetry, feature flags, account checks) are not LLM calls: the assertion here
is that none of them is counted as one — any row they leave has ``api = ''`` (so no LLM total, board or error
rate counts it) and, answered as the real services answer, no error.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import LLMTAP, Mock, Sidecar

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

TESTS = Path(__file__).resolve().parents[1]
PINS_DIR = TESTS / "agents"
TOOLS = TESTS / ".tools" / "agents"
PINS: dict[str, str] = json.loads((PINS_DIR / "package.json").read_text())["dependencies"]
# the model calls of these agents, as the mock receives them (POST; WebSocket creates are counted apart)
MODEL_CALL = re.compile(r"^(/v1/messages|/v1/responses|/backend-api/codex/responses|/v1beta/models/[^/]+:\w+)$")
ANSWER = "The quick brown fox jumps over"  # the mock's text (its first words)


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        raise RuntimeError(f"CI runs the real agents: {reason}")
    pytest.skip(reason)


def installed() -> dict[str, str]:
    out = {}
    for name in PINS:
        manifest = TOOLS / "node_modules" / name / "package.json"
        if manifest.is_file():
            out[name] = json.loads(manifest.read_text())["version"]
    return out


@dataclass(frozen=True)
class Agents:
    claude: Path
    codex: Path
    gemini: Path


@pytest.fixture(scope="module")
def agents() -> Agents:
    node = shutil.which("node")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout if node else ""
    if not re.match(r"v(2\d|[3-9]\d)\.", version):
        unavailable(f"Codex's launcher and Gemini CLI need Node.js >= 20 on PATH (found {version.strip() or 'none'})")
    if installed() != PINS:
        npm = shutil.which("npm")
        if npm is None:
            unavailable("npm is not installed: it installs the pinned agents from the registry")
        assert npm is not None
        TOOLS.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy2(PINS_DIR / name, TOOLS / name)
        cmd = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
        r = subprocess.run(cmd, cwd=TOOLS, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            ping = subprocess.run([npm, "ping"], capture_output=True, text=True, timeout=120)
            if ping.returncode != 0:
                unavailable(f"the npm registry is unreachable: {(ping.stderr.strip().splitlines() or ['?'])[-1]}")
            raise AssertionError(f"npm ci of tests/agents failed: {r.stderr[-2000:]}")
        assert installed() == PINS
    modules = TOOLS / "node_modules"
    # the platform package's native binary (--ignore-scripts leaves the wrapper's bin a placeholder)
    (claude,) = sorted(modules.glob("@anthropic-ai/claude-code-*/claude"))[:1] or [None]
    if claude is None:
        unavailable("Claude Code ships no native binary for this platform")
    assert claude is not None
    return Agents(claude, modules / ".bin" / "codex", modules / ".bin" / "gemini")


@dataclass
class Run:
    service: str
    out: subprocess.CompletedProcess[str]
    requests: list[dict[str, Any]]  # what the mock received during the run
    sockets: list[dict[str, Any]]

    def model_calls(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "POST" and MODEL_CALL.match(r["path"].split("?")[0])]

    def creates(self) -> list[dict[str, Any]]:
        """The ``response.create`` messages of the WebSocket model calls."""
        out = []
        for sock in self.sockets:
            for raw in sock["received"]:
                msg = json.loads(raw)
                if msg.get("type") == "response.create":
                    out.append(msg)
        return out


def run(
    sc: Sidecar, mock: Mock, tmp: Path, cmd: list[str], env: dict[str, str], files: dict[str, str] | None = None
) -> Run:
    """One agent run: its own HOME (and CODEX_HOME) in ``tmp``, stdin closed, a service named for the test."""
    home, work = tmp / "home", tmp / "work"
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    work.mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        path = home / name if name.startswith(".") else work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    drop = ("_PROXY", "_proxy")
    own = ("LLMTAP_", "NODE_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_", "CODEX_", "CLAUDE_", "SSL_CERT")
    base = {k: v for k, v in os.environ.items() if not k.endswith(drop) and not k.startswith(own)}
    base.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), DISABLE_AUTOUPDATER="1", **env)
    service = f"agent-{uuid.uuid4().hex[:10]}"
    args = ["exec", "--listen", f"127.0.0.1:{sc.listen}", "--data-dir", str(sc.data_dir), "--service", service]
    mock.reset()
    out = subprocess.run(
        [*LLMTAP, *args, "--", *cmd],
        cwd=work,
        env=base,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return Run(service, out, mock.requests(), mock.sockets())


def llm_rows(sc: Sidecar, r: Run, n: int) -> list[dict[str, Any]]:
    rows = sc.rows(f"service = '{r.service}' AND api != ''", n, timeout=20)
    assert len(rows) == n, (n, [(x["api"], x["request_model"]) for x in rows])
    assert sc.rows(f"service = '{r.service}' AND api != ''", n + 1, timeout=1) == rows  # no more come
    return rows


def other_rows_count_nowhere(sc: Sidecar, r: Run) -> None:
    """The agent's non-LLM requests: any row they leave is outside the LLM totals (``api = ''``) and, answered as
    the services answer, no error. (Once such rows carry ``operation = 'other'`` or are not written, this holds
    as it is.)"""
    other = sc.rows(f"service = '{r.service}' AND api = ''", 0, timeout=0)
    assert all(x["operation"] in ("", "other") and x["status_code"] < 400 for x in other), [
        (x["server_address"], x["status_code"], x["operation"]) for x in other
    ]


def llm_figures_are_the_model_calls(sc: Sidecar, r: Run, n: int) -> None:
    """What the overview and ``check-cost`` show for the agent's service: its model calls, no error — whatever
    else the agent sent (telemetry, feature flags) is under other requests."""
    import time

    from dashboard_kit import W

    from llmtap.admin.macros import QueryContext, expand

    ctx = QueryContext(time.time() - 3600, time.time() + 60, 60, {"service": [r.service]})
    figures = f"SELECT count() AS calls, countIf(outcome = 'error') AS errors FROM llm_calls WHERE {W}"
    (fig,) = sc.sql(expand(figures, ctx))
    assert (int(fig["calls"]), int(fig["errors"])) == (n, 0)  # the overview's Calls and Error rate
    out = subprocess.run(
        [*LLMTAP, "check-cost", "--service", r.service, "--window", "1h", "--allow-empty",
         "--admin", f"127.0.0.1:{sc.admin}", "--data-dir", str(sc.data_dir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0 and f"{n} calls in the last 1h" in out.stderr, out.stderr


def assert_answered(r: Run) -> None:
    assert r.out.returncode == 0, r.out.stderr[-3000:]
    assert ANSWER in r.out.stdout, (r.out.stdout[-2000:], r.out.stderr[-2000:])
    assert "went around the proxy" not in r.out.stderr  # llmtap exec's Node warning: these calls are captured


# -- Claude Code ----------------------------------------------------------------------------------------


def claude_rows(sidecar: Sidecar, r: Run, billing: str) -> None:
    assert_answered(r)
    calls = r.model_calls()
    assert calls, [x["path"] for x in r.requests]
    rows = llm_rows(sidecar, r, len(calls))
    sessions = {c["headers"]["x-claude-code-session-id"] for c in calls}
    for row in rows:
        assert (row["provider"], row["api"], row["transport"], row["outcome"]) == (
            "anthropic",
            "anthropic.messages",
            "http",
            "ok",
        )
        assert (row["client_name"], row["client_version"]) == ("claude-code", PINS["@anthropic-ai/claude-code"])
        assert (row["billing"], row["service"]) == (billing, r.service)
        assert row["session_id"] in sessions
        # the mock's usage: 28 uncached + 1,200 written + 3,400 read (inclusive, per the contract), 7 out
        assert (row["input_tokens"], row["cache_write_tokens"], row["cache_read_tokens"]) == (4628, 1200, 3400)
        assert row["output_tokens"] == 7
    other_rows_count_nowhere(sidecar, r)
    llm_figures_are_the_model_calls(sidecar, r, len(calls))


def test_claude_code_with_an_api_key(sidecar: Sidecar, mock: Mock, agents: Agents, tmp_path: Path) -> None:
    key = "sk-ant-api03-" + "b" * 86 + "-AAAAAA"
    r = run(sidecar, mock, tmp_path, [str(agents.claude), "-p", "Say hi"], {"ANTHROPIC_API_KEY": key})
    claude_rows(sidecar, r, "api")


def test_claude_code_with_a_plan_token(sidecar: Sidecar, mock: Mock, agents: Agents, tmp_path: Path) -> None:
    token = "sk-ant-oat01-" + "a" * 86
    r = run(sidecar, mock, tmp_path, [str(agents.claude), "-p", "Say hi"], {"CLAUDE_CODE_OAUTH_TOKEN": token})
    claude_rows(sidecar, r, "subscription")
    (row, *_) = sidecar.rows(f"service = '{r.service}' AND api != ''", 1)
    assert row["ratelimit_headers"]["anthropic-ratelimit-unified-5h-utilization"] == "0.42"  # the plan window


# -- Codex CLI --------------------------------------------------------------------------------------------


def codex_rows(sidecar: Sidecar, r: Run, transport: str, billing: str, host: str) -> list[dict[str, Any]]:
    assert_answered(r)
    if transport == "websocket":
        creates = r.creates()
        session = next(s["headers"]["session-id"] for s in r.sockets)
    else:
        creates = [json.loads(c["body"]) for c in r.model_calls()]
        session = r.model_calls()[0]["headers"]["session-id"]
    assert creates
    rows = llm_rows(sidecar, r, len(creates))
    for row in rows:
        assert (row["provider"], row["api"], row["transport"], row["outcome"]) == (
            "openai",
            "openai.responses",
            transport,
            "ok",
        )
        assert (row["client_name"], row["client_version"]) == ("codex", PINS["@openai/codex"])
        assert (row["billing"], row["service"], row["server_address"]) == (billing, r.service, host)
        assert row["session_id"] == session
    # the turn: the mock's usage once (12,033 in of which 11,904 cached, 44 out of which 12 reasoning)
    turns = [row for row, c in zip(rows, creates, strict=True) if c.get("generate") is not False]
    assert [(t["input_tokens"], t["cache_read_tokens"], t["output_tokens"], t["reasoning_tokens"]) for t in turns] == [
        (12033, 11904, 44, 12)
    ]
    other_rows_count_nowhere(sidecar, r)
    return rows


CODEX_ARGS = ["exec", "--skip-git-repo-check", "Say hi"]


def test_codex_over_websocket_with_a_200_kb_request(
    sidecar: Sidecar, mock: Mock, agents: Agents, tmp_path: Path
) -> None:
    """Codex puts AGENTS.md into its request (up to ``project_doc_max_bytes``): 200 KB of it make a create of
    more than 200 KB."""
    agents_md = "# Project notes\n" + "Keep the tests quick and the rows right.\n" * 5000
    r = run(
        sidecar,
        mock,
        tmp_path,
        [str(agents.codex), *CODEX_ARGS],
        {"CODEX_API_KEY": "sk-test-codex-0123456789"},
        {"AGENTS.md": agents_md, ".codex/config.toml": "project_doc_max_bytes = 262144\n"},
    )
    rows = codex_rows(sidecar, r, "websocket", "api", "api.openai.com")
    creates = r.creates()
    assert max(len(json.dumps(c)) for c in creates) > 200_000
    # a prewarm ("generate": false, carrying nothing) is its own row, with no output and none of the turn's usage
    for row, create in zip(rows, creates, strict=True):
        if create.get("generate") is False:
            assert create.get("input") == [] and not create.get("instructions")
            assert (row["input_tokens"], row["output_tokens"]) == (0, 0)


def test_codex_over_http(sidecar: Sidecar, mock: Mock, agents: Agents, tmp_path: Path) -> None:
    """A provider of the user's own config (Codex speaks HTTP to those unless told otherwise)."""
    config = (
        'model = "gpt-5-codex"\nmodel_provider = "openai-http"\n[model_providers.openai-http]\nname = "OpenAI"\n'
        'base_url = "https://api.openai.com/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
    )
    r = run(
        sidecar,
        mock,
        tmp_path,
        [str(agents.codex), *CODEX_ARGS],
        {"OPENAI_API_KEY": "sk-test-codex-0123456789"},
        {".codex/config.toml": config},
    )
    assert not r.sockets
    rows = codex_rows(sidecar, r, "http", "api", "api.openai.com")
    assert {row["request_model"] for row in rows} == {"gpt-5-codex"}


def test_codex_on_a_chatgpt_plan(sidecar: Sidecar, mock: Mock, agents: Agents, tmp_path: Path) -> None:
    """A ChatGPT login (auth.json): Codex checks its workspace on chatgpt.com before it calls the model there."""

    def b64(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    account = str(uuid.uuid4())
    claims = {
        "email": "dev@example.com",
        "exp": 4102444800,
        "https://api.openai.com/auth": {"chatgpt_plan_type": "plus", "chatgpt_account_id": account},
    }
    jwt = f"{b64({'alg': 'RS256', 'typ': 'JWT'})}.{b64(claims)}.c2ln"
    auth = {
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": None,
        "tokens": {"id_token": jwt, "access_token": jwt, "refresh_token": "rt-mock", "account_id": account},
        "last_refresh": "2999-01-01T00:00:00Z",
    }
    r = run(sidecar, mock, tmp_path, [str(agents.codex), *CODEX_ARGS], {}, {".codex/auth.json": json.dumps(auth)})
    assert any(x["path"] == "/backend-api/wham/accounts/check" for x in r.requests)
    codex_rows(sidecar, r, "websocket", "subscription", "chatgpt.com")


# -- Gemini CLI ------------------------------------------------------------------------------------------


def test_gemini_cli_with_an_api_key(sidecar: Sidecar, mock: Mock, agents: Agents, tmp_path: Path) -> None:
    env = {"GEMINI_API_KEY": "AIzaSyTEST0123456789abcdefghijklmnopqrs", "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    r = run(sidecar, mock, tmp_path, [str(agents.gemini), "-p", "Say hi"], env)
    assert_answered(r)
    calls = r.model_calls()
    configs = [json.loads(c["body"]).get("generationConfig") or {} for c in calls]
    routers = [c for c in configs if c.get("responseMimeType") == "application/json"]
    assert len(routers) == 1  # its JSON-mode router answered at once: no retries (it took 1m35s on prose)
    rows = llm_rows(sidecar, r, len(calls))
    for row in rows:
        assert (row["provider"], row["api"], row["transport"], row["outcome"]) == (
            "gcp.gemini",  # OTel's gen_ai.provider.name for the Gemini API
            "gemini.generate_content",
            "http",
            "ok",
        )
        assert (row["billing"], row["service"], row["session_id"]) == ("api", r.service, "")  # it sends no session
        # the mock's usage: 120 prompt (100 cached), 6 candidates + 30 thoughts out (inclusive)
        assert (row["input_tokens"], row["cache_read_tokens"], row["output_tokens"]) == (120, 100, 36)
    other_rows_count_nowhere(sidecar, r)
    # its User-Agent is "GeminiCLI-tui/0.61.0/…"
    assert {(row["client_name"], row["client_version"]) for row in rows} == {("gemini-cli", PINS["@google/gemini-cli"])}
