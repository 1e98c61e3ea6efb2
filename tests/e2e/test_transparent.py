"""``llmtap run --mode transparent``: clients with no proxy variables, redirected by ``llmtap netfilter apply``.

As root, the test builds a pod-like network namespace (the client and llmtap share it, as an app and its
sidecar share a pod) joined by a veth pair to an "internet" namespace where the mock provider listens on
port 443. The client namespace resolves the providers' real names to the mock (``/etc/netns/<ns>/hosts``,
which ``ip netns exec`` mounts over /etc/hosts). llmtap runs with a group of its own, which the rules leave
alone; everything else's outbound 443 goes to llmtap. The clients trust llmtap's CA the way a user would
(``SSL_CERT_FILE``, ``--cacert``, ``NODE_EXTRA_CA_CERTS``) and set no proxy variable at all.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import LLMTAP, session_id, stop

from llmtap.testing import netns
from llmtap.testing.netns import ORIGIN_IP, Pod, PodSidecar, in_netns, start_pod_sidecar

NODE, CURL = shutil.which("node"), shutil.which("curl")
WHY_NOT = netns.unavailable()
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)]


@pytest.fixture(scope="module")
def pod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pod]:
    with netns.pod(tmp_path_factory.mktemp("mock-certs")) as p:
        yield p


@pytest.fixture(scope="module")
def sidecar(pod: Pod, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodSidecar]:
    sc = start_pod_sidecar(pod, tmp_path_factory.mktemp("transparent") / "data", "--workers", "2")
    yield sc
    pod.netfilter("remove")
    stop(sc.proc)


CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
SDK = """
import json, sys, openai
c = openai.OpenAI(api_key="sk-test", max_retries=0, default_headers={"x-llmtap-session": sys.argv[1]})
r = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
print(json.dumps({"id": r.id, "usage": r.usage.model_dump(), "model": r.model}))
"""
NODE_FETCH = """
const r = await fetch("https://api.openai.com/v1/chat/completions", {method: "POST",
  headers: {"content-type": "application/json", authorization: "Bearer sk-test", "x-llmtap-session": process.argv[1]},
  body: JSON.stringify(CHAT)});
const j = await r.json();
console.log(JSON.stringify({id: j.id, usage: j.usage, model: j.model}));
""".replace("CHAT", json.dumps(CHAT))


def _capture_mode(sc: PodSidecar, span_id: str) -> str:
    rows = sc.sql(f"SELECT SpanAttributes['llmtap.capture_mode'] AS m FROM otel_traces WHERE SpanId = '{span_id}'")
    return str(rows[0]["m"]) if rows else ""


def _assert_row(sc: PodSidecar, sid: str, answer: dict[str, Any], mode: str = "transparent") -> None:
    """The row says what the client received (the mock's answer), and the span says how it was captured."""
    row = sc.row(sid, timeout=15)
    assert (row["provider"], row["api"]) == ("openai", "openai.chat_completions")
    assert row["server_address"] == "api.openai.com"  # the name (SNI), not the address it was sent to
    assert (row["outcome"], row["status_code"], row["response_id"]) == ("ok", 200, answer["id"])
    assert (row["request_model"], row["response_model"]) == ("gpt-4o-mini", answer["model"])
    assert (row["input_tokens"], row["output_tokens"]) == (
        answer["usage"]["prompt_tokens"],
        answer["usage"]["completion_tokens"],
    )
    assert row["usage_source"] == "provider"
    assert 0 < row["ttfb_ms"] <= row["duration_ms"]
    assert _capture_mode(sc, row["span_id"]) == mode


def test_openai_sdk_without_proxy_variables(pod: Pod, sidecar: PodSidecar) -> None:
    sid = session_id()
    r = pod.run(str(Path(LLMTAP[0])), "-c", SDK, sid, env={"SSL_CERT_FILE": str(sidecar.bundle)})
    assert r.returncode == 0, r.stderr
    _assert_row(sidecar, sid, json.loads(r.stdout))


@pytest.mark.skipif(CURL is None, reason="needs curl")
def test_curl_without_proxy_variables(pod: Pod, sidecar: PodSidecar) -> None:
    sid = session_id()
    r = pod.run(
        "curl", "-sS", "--fail", "--cacert", str(sidecar.bundle), "https://api.openai.com/v1/chat/completions",
        "-H", "content-type: application/json", "-H", "authorization: Bearer sk-test", "-H", f"x-llmtap-session: {sid}",
        "-d", json.dumps(CHAT),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    _assert_row(sidecar, sid, json.loads(r.stdout))


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_node_fetch_without_preload(pod: Pod, sidecar: PodSidecar) -> None:
    sid = session_id()
    ca = sidecar.data_dir / "ca" / "mitmproxy-ca-cert.pem"
    r = pod.run("node", "--input-type=module", "-e", NODE_FETCH, sid, env={"NODE_EXTRA_CA_CERTS": str(ca)})
    assert r.returncode == 0, r.stderr
    _assert_row(sidecar, sid, json.loads(r.stdout))


def _issuer(ns: str, host: str, cafile: Path) -> str:
    """The issuer of the certificate a client in ``ns`` sees for ``host`` (verified against ``cafile``)."""

    def connect() -> str:
        ctx = ssl.create_default_context(cafile=str(cafile))
        with (
            socket.create_connection((ORIGIN_IP, 443), timeout=10) as raw,
            ctx.wrap_socket(raw, server_hostname=host) as tls,
        ):
            return str(dict(x[0] for x in tls.getpeercert()["issuer"])["commonName"])

    return in_netns(ns, connect)


def test_other_hosts_pass_through_undecrypted(pod: Pod, sidecar: PodSidecar) -> None:
    # ollama.internal is no LLM host here: the client sees the origin's own certificate through the redirect
    assert _issuer(pod.ns, "ollama.internal", pod.mock_ca) == "llmtap mock provider CA"
    with pytest.raises(ssl.SSLCertVerificationError):
        _issuer(pod.ns, "ollama.internal", sidecar.data_dir / "ca" / "mitmproxy-ca-cert.pem")
    # ... while an LLM host's is llmtap's: the same address and port, decided by the name (SNI)
    assert _issuer(pod.ns, "api.openai.com", sidecar.data_dir / "ca" / "mitmproxy-ca-cert.pem") == (
        "llmtap interception CA"
    )
    assert sidecar.rows("server_address = 'ollama.internal'", 0) == []
    _, body = sidecar.admin_request("GET", "/healthz")
    assert json.loads(body)["capture_mode"] == "transparent"


def _refused(ns: str) -> None:
    """A connection to the provider's 443 is refused (a reset at once: not a hang until a timeout)."""

    def connect() -> None:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((ORIGIN_IP, 443), timeout=20).close()

    in_netns(ns, connect)


def _direct(pod: Pod) -> None:
    """Without the rules, the client reaches the origin itself (its certificate, not llmtap's)."""
    assert _issuer(pod.ns, "api.openai.com", pod.mock_ca) == "llmtap mock provider CA"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_stopped_sidecar_refuses_until_the_rules_are_removed(pod: Pod, tmp_path: Path, sig: signal.Signals) -> None:
    """The documented fail-open behaviour: with the rules in place and llmtap gone, redirected connections
    are refused at once (no hang); ``llmtap netfilter remove`` restores direct traffic."""
    sc = start_pod_sidecar(pod, tmp_path / "data", "--workers", "1", "--drain-timeout", "2s")
    llmtap_ca = sc.data_dir / "ca" / "mitmproxy-ca-cert.pem"
    try:
        assert _issuer(pod.ns, "api.openai.com", llmtap_ca) == "llmtap interception CA"
        sc.proc.send_signal(sig)
        sc.proc.wait(timeout=60)
        deadline = time.monotonic() + 30  # a SIGKILLed supervisor's worker follows it (PR_SET_PDEATHSIG)
        while True:
            try:
                _refused(pod.ns)
                break
            except BaseException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        pod.netfilter("remove")
        stop(sc.proc)
    _direct(pod)


@pytest.mark.skipif(CURL is None, reason="needs curl")
def test_local_mode_where_the_kernel_loads_the_redirector(pod: Pod, tmp_path: Path) -> None:
    """``--mode local:PROCESS``: mitmproxy's eBPF redirector captures one process by name (a copy of curl with
    a name of its own, so nothing else on the machine is touched). Where the kernel refuses the redirector's
    programs, llmtap must say so in one line and exit 2 (it must not run capturing nothing): then the test
    is skipped with that line."""
    assert CURL and netns.IP
    name = f"lt-local-{os.getpid() % 100000}"
    client = tmp_path / name
    shutil.copy2(CURL, client)
    env_path = os.environ.get("PATH", "")
    if shutil.which("sudo") is None:  # mitmproxy elevates with `sudo --non-interactive` even as root
        shim = tmp_path / "bin"
        shim.mkdir()
        drop_options = 'while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done'
        (shim / "sudo").write_text(f'#!/bin/sh\n{drop_options}\nexec "$@"\n')
        (shim / "sudo").chmod(0o755)
        env_path = f"{shim}:{env_path}"

    def refused() -> None:  # the redirector gives up within moments of starting where the kernel refuses it
        log = (tmp_path / "data.log").read_text().strip()
        last = log.splitlines()[-1]
        assert last.startswith("llmtap run: --mode local:"), log  # one line saying why, exit 2
        pytest.skip(f"this kernel does not load mitmproxy's redirector: {last}")

    try:
        sc = start_pod_sidecar(pod, tmp_path / "data", mode=f"local:{name}", env={"PATH": env_path})
    except RuntimeError:
        refused()
    try:
        deadline = time.monotonic() + 60
        sid = session_id()
        while True:  # the redirector may take a moment to capture the process
            r = pod.run(
                str(client), "-sS", "--cacert", str(sc.bundle), "https://api.openai.com/v1/chat/completions",
                "-H", "content-type: application/json", "-H", f"x-llmtap-session: {sid}", "-d", json.dumps(CHAT),
            )  # fmt: skip
            if r.returncode == 0:
                break
            if sc.proc.poll() is not None:
                assert sc.proc.returncode == 2
                refused()
            assert time.monotonic() < deadline, r.stderr
            time.sleep(0.2)
        _assert_row(sc, sid, json.loads(r.stdout), mode="local")
    finally:
        stop(sc.proc)
