"""A pod in network namespaces, for transparent mode (``tests/e2e/test_transparent.py``, ``bench/transparent.py``).

As root: a pod-like namespace (the client and llmtap share it, as an app and its sidecar share a pod) joined
by a veth pair to an "internet" namespace where the mock provider listens on port 443. The pod resolves the
providers' real names to the mock (``/etc/netns/<ns>/hosts``, which ``ip netns exec`` mounts over
/etc/hosts). llmtap runs with a group of its own (:data:`LLMTAP_GID`), which ``llmtap netfilter apply --gid``
leaves alone; everything else's outbound 443 goes to llmtap. The addresses are the namespaces' own: the root
namespace never sees them. :func:`in_netns` runs code on a thread inside the pod (its sockets are the pod's).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Environment
from .harness import LLMTAP, Sidecar, free_port, stop

IP, NFT = shutil.which("ip"), shutil.which("nft")
LLMTAP_GID = 30030  # llmtap's own group in a pod: the rules let its connections out
SUBNET = "10.213.0"
ORIGIN_IP = f"{SUBNET}.1"
NAMES = ("api.openai.com", "ollama.internal")  # resolved to the mock in the pod


def unavailable() -> str:
    """Why a pod cannot be built here ('' when it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and netfilter rules)"
    if IP is None:
        return "needs iproute2's ip (ip netns)"
    if NFT is None:
        return "needs nft (apt-get install nftables; .ci/run installs it)"
    probe = f"llmtap-probe-{os.getpid()}"
    r = subprocess.run([IP, "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    subprocess.run([IP, "netns", "del", probe], capture_output=True)
    return ""


def in_netns[T](ns: str, fn: Callable[[], T]) -> T:
    """``fn()`` on a thread that joined network namespace ``ns`` (its sockets are that namespace's)."""
    out: dict[str, Any] = {}

    def run() -> None:
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            os.setns(fd, os.CLONE_NEWNET)
        finally:
            os.close(fd)
        try:
            out["value"] = fn()
        except BaseException as e:
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


@dataclass
class Pod:
    """The client namespace (app + llmtap), the origin namespace and the mock in it."""

    ns: str
    origin: str
    mock: subprocess.Popen[str]
    mock_ca: Path

    def run(self, *cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """A client process in the pod: no proxy variable, whatever this process has."""
        assert IP
        clean = {k: v for k, v in Environment.read().variables.items() if not k.upper().endswith("_PROXY")}
        clean = {k: v for k, v in clean.items() if not k.startswith("LLMTAP_")} | (env or {})
        argv = [IP, "netns", "exec", self.ns, *cmd]
        return subprocess.run(argv, env=clean, capture_output=True, text=True, timeout=60)

    def netfilter(self, *args: str) -> None:
        r = self.run(*LLMTAP, "netfilter", *args)
        assert r.returncode == 0, r.stderr


class PodSidecar(Sidecar):
    """The harness's sidecar, its admin API reached from inside the pod's namespace."""

    ns: str = ""

    def admin_request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        return in_netns(self.ns, lambda: Sidecar.admin_request(self, method, path, body, headers))

    def healthy(self) -> bool:
        try:
            status, body = self.admin_request("GET", "/healthz")
            return status == 200 and json.loads(body).get("status") == "ok"
        except OSError:
            return False


def _ip(*args: str) -> None:
    assert IP
    subprocess.run([IP, *args], check=True, capture_output=True)


@contextlib.contextmanager
def pod(cert_dir: Path) -> Iterator[Pod]:
    """A pod and its origin namespace with the mock on port 443; both deleted at the end."""
    tag = f"{os.getpid() % 100000}"
    ns, origin = f"llmtap-pod-{tag}", f"llmtap-net-{tag}"
    hosts_dir = Path("/etc/netns") / ns
    mock: subprocess.Popen[str] | None = None
    try:
        _ip("netns", "add", ns)
        _ip("netns", "add", origin)
        _ip("link", "add", f"lt{tag}a", "type", "veth", "peer", "name", f"lt{tag}b")
        _ip("link", "set", f"lt{tag}a", "netns", ns)
        _ip("link", "set", f"lt{tag}b", "netns", origin)
        for name, dev, addr in ((ns, f"lt{tag}a", f"{SUBNET}.2"), (origin, f"lt{tag}b", ORIGIN_IP)):
            _ip("-n", name, "link", "set", "lo", "up")
            _ip("-n", name, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", name, "link", "set", dev, "up")
        hosts_dir.mkdir(parents=True, exist_ok=True)
        (hosts_dir / "hosts").write_text(f"127.0.0.1 localhost\n{ORIGIN_IP} {' '.join(NAMES)}\n")
        assert IP
        mock = subprocess.Popen(
            [IP, "netns", "exec", origin, *LLMTAP, "mock-provider", "--listen", f"{ORIGIN_IP}:443",
             "--cert-dir", str(cert_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert mock.stdout is not None
        line = mock.stdout.readline()
        if not line:
            raise RuntimeError(f"mock provider failed: {mock.stderr.read() if mock.stderr else ''}")
        yield Pod(ns, origin, mock, Path(json.loads(line)["ca"]))
    finally:
        if mock is not None:
            stop(mock)
        for name in (ns, origin):
            subprocess.run([IP or "ip", "netns", "del", name], capture_output=True)
        shutil.rmtree(hosts_dir, ignore_errors=True)


def start_pod_sidecar(
    pod: Pod, data_dir: Path, *extra: str, mode: str = "transparent", env: dict[str, str] | None = None
) -> PodSidecar:
    """``llmtap run --mode MODE`` in the pod as group :data:`LLMTAP_GID`; in transparent mode, once it is up,
    ``llmtap netfilter apply`` sends the pod's outbound 443 to it."""
    assert IP
    listen, admin = free_port(), free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir.parent / f"{data_dir.name}.log"
    args = [IP, "netns", "exec", pod.ns, *LLMTAP, "run", "--mode", mode, "--listen", f"127.0.0.1:{listen}",
            "--admin", f"127.0.0.1:{admin}", "--data-dir", str(data_dir), "--upstream-ca", str(pod.mock_ca),
            *extra]  # fmt: skip

    def own_group() -> None:
        os.setgroups([])
        os.setgid(LLMTAP_GID)

    with open(log, "w") as f:
        proc = subprocess.Popen(
            args,
            stdout=f,
            stderr=subprocess.STDOUT,
            preexec_fn=own_group,
            env={**Environment.read().variables, **(env or {})},
        )
    sc = PodSidecar(proc, listen, admin, data_dir, log)
    sc.ns = pod.ns
    deadline = time.monotonic() + 60
    while not sc.healthy():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"llmtap run did not start (exit {proc.returncode}): {log.read_text()}")
        time.sleep(0.1)
    if mode == "transparent":
        pod.netfilter("apply", "--port", str(listen), "--gid", str(LLMTAP_GID))
    return sc
