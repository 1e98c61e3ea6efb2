"""Node apps are captured: the official ``openai`` npm package through a real ``llmtap run`` over real TLS.

Node's ``fetch`` ignores ``HTTPS_PROXY`` (before Node 24 it also ignores ``NODE_USE_ENV_PROXY``), so the
README's "the official SDKs honour these variables" was false for Node: calls went straight to the
provider, uncaptured. What ``llmtap env`` prints must work for the Node installed (here /usr/bin/node),
and base-URL mode must work on any Node. The packages come from tests/node/package-lock.json (npm ci).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import LLMTAP, Sidecar, session_id

from llmtap.clientenv import NODE_PRELOAD, Node, client_env, detect_node, node_honours_env_proxy

NODE = shutil.which("node")
NPM = shutil.which("npm")
HERE = Path(__file__).resolve().parents[1] / "node"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not (NODE and NPM), reason="node and npm are needed (apt-get install nodejs npm)"),
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A Node app directory with the pinned ``openai`` and ``undici`` installed."""
    d = tmp_path_factory.mktemp("node-app")
    for name in ("package.json", "package-lock.json", "chat.mjs"):
        shutil.copy2(HERE / name, d / name)
    assert NPM
    r = subprocess.run(
        [NPM, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=d, capture_output=True, text=True, timeout=240
    )
    assert r.returncode == 0, r.stderr
    yield d


def clean_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.upper().endswith("_PROXY") and not k.startswith(("LLMTAP_", "NODE_", "OPENAI_"))
    }


def node_chat(app: Path, sid: str, env: dict[str, str], shell_prefix: str = "") -> subprocess.CompletedProcess[str]:
    cmd = f'{shell_prefix}exec node chat.mjs "{sid}"'
    return subprocess.run(["sh", "-c", cmd], cwd=app, env=env, capture_output=True, text=True, timeout=60)


def test_what_llmtap_env_prints_captures_the_node_openai_sdk(proxied: Sidecar, app: Path) -> None:
    sid = session_id()
    llmtap = " ".join(LLMTAP)
    # exactly what the README tells a user to run
    prefix = f'eval "$({llmtap} env --data-dir {proxied.data_dir} --listen 127.0.0.1:{proxied.listen})" && '
    r = node_chat(app, sid, clean_env(), prefix)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["chunks"] >= 3 and out["text"]
    row = proxied.row(sid, timeout=15)
    assert (row["provider"], row["api"], row["outcome"]) == ("openai", "openai.chat_completions", "ok")
    assert row["stream"] in (1, True)
    assert row["usage_source"] == "provider" and row["output_tokens"] > 0  # include_usage reached the record


@pytest.mark.skipif(bool(detect_node() and detect_node().env_proxy), reason="this Node honours NODE_USE_ENV_PROXY")  # type: ignore[union-attr]
def test_on_this_node_https_proxy_alone_is_not_enough(proxied: Sidecar, app: Path) -> None:
    """The failure the preload fixes: with only the proxy variables, Node's fetch bypasses the sidecar."""
    sid = session_id()
    env = {
        **clean_env(),
        "HTTPS_PROXY": proxied.proxy_url,
        "NODE_USE_ENV_PROXY": "1",
        "NODE_EXTRA_CA_CERTS": str(proxied.bundle),
    }
    node_chat(app, sid, env)  # goes straight to api.openai.com (fails offline, or reaches the real API)
    assert proxied.rows(f"session_id = '{sid}'", 1, timeout=3) == []


def test_base_url_mode_captures_the_node_openai_sdk_on_any_node(proxied: Sidecar, app: Path) -> None:
    sid = session_id()
    env = {**clean_env(), "OPENAI_BASE_URL": f"http://127.0.0.1:{proxied.listen}/openai/v1"}
    r = node_chat(app, sid, env)
    assert r.returncode == 0, r.stderr
    assert proxied.row(sid, timeout=15)["outcome"] == "ok"


def test_the_preload_without_undici_warns_only_when_a_call_goes_around_the_proxy(
    proxied: Sidecar, tmp_path: Path
) -> None:
    """No undici to route Node's fetch: a program whose fetch reaches a provider directly is told its calls are
    not captured; one that makes no such call (Codex's Node launcher, a local call NO_PROXY exempts) is not."""
    if detect_node() and detect_node().env_proxy:  # type: ignore[union-attr]
        pytest.skip("this Node honours NODE_USE_ENV_PROXY: the preload does nothing")
    direct = "try { await fetch('https://api.openai.com/v1/models') } catch (e) {}\nconsole.log('ran')\n"
    local = f"try {{ await fetch('http://127.0.0.1:{proxied.admin}/healthz') }} catch (e) {{}}\nconsole.log('ran')\n"
    programs = {"quiet.mjs": "console.log('ran')\n", "local.mjs": local, "direct.mjs": direct}
    env = {
        **clean_env(),
        "HTTPS_PROXY": proxied.proxy_url,
        "NO_PROXY": "localhost,127.0.0.1",
        "NODE_OPTIONS": f'--require "{NODE_PRELOAD}"',
    }
    stderr = {}
    for name, source in programs.items():
        (tmp_path / name).write_text(source)
        r = subprocess.run(["node", name], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stdout.strip() == "ran", r.stderr  # the app still runs
        stderr[name] = r.stderr
    assert "LlmtapWarning" not in stderr["quiet.mjs"] and "LlmtapWarning" not in stderr["local.mjs"]
    warning = stderr["direct.mjs"]
    assert "api.openai.com went around the proxy" in warning and "not captured" in warning
    assert "npm i undici" in warning and "base-URL mode" in warning


def test_client_env_per_node_version() -> None:
    assert not node_honours_env_proxy("v20.20.2", "--use-openssl-ca ...")
    assert node_honours_env_proxy("v24.0.0", "")
    assert node_honours_env_proxy("v22.21.0", "  --use-env-proxy   parse proxy settings from ...")
    bundle = Path("/d/ca-bundle.pem")

    def names(node: Node | None) -> dict[str, str]:
        return {v.name: v.value for v in client_env("http://127.0.0.1:8080", bundle, node)}

    new, old, unknown = names(Node("24.1.0", True)), names(Node("20.20.2", False)), names(None)
    for env in (new, old, unknown):
        assert env["HTTPS_PROXY"] == "http://127.0.0.1:8080" and env["NODE_EXTRA_CA_CERTS"] == str(bundle)
        assert env["NODE_USE_ENV_PROXY"] == "1" and env["SSL_CERT_FILE"] == str(bundle)
    assert "NODE_OPTIONS" not in new
    assert old["NODE_OPTIONS"] == unknown["NODE_OPTIONS"] == f'--require "{NODE_PRELOAD}"'
    assert NODE_PRELOAD.is_file()
