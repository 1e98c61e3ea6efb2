"""Every start-up failure is one line on stderr naming the flag and the fix, with exit code 2.

Each case is a real ``llmtap`` process; what it must say is the flag a user would change.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import LLMTAP, Sidecar, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_")}
    e.update(env or {})
    return subprocess.run([*LLMTAP, *args], capture_output=True, text=True, timeout=90, env=e)


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something else listens on (bound the way servers bind: SO_REUSEADDR)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def run_args(tmp: Path, *extra: str) -> list[str]:
    return ["run", "--data-dir", str(tmp / "d"), "--listen", f"127.0.0.1:{free_port()}",
            "--admin", f"127.0.0.1:{free_port()}", *extra]  # fmt: skip


def unwritable(tmp: Path) -> str:
    if os.geteuid() == 0:  # root writes through modes: a directory of a read-only kernel file system
        return "/sys/kernel"
    d = tmp / "ro"
    d.mkdir()
    d.chmod(0o500)
    return str(d)


def on_busy_ports(tmp: Path, busy: int, *extra: str) -> list[str]:
    """Both ports held by another process: a bad value must be what is reported, never the port (issue 28)."""
    return run_args(tmp, "--listen", f"127.0.0.1:{busy}", "--admin", f"127.0.0.1:{busy}", *extra)


Case = Callable[[Path, int], tuple[list[str], dict[str, str]]]
CASES: dict[str, tuple[Case, list[str]]] = {
    "proxy port in use": (lambda t, busy: (run_args(t, "--listen", f"127.0.0.1:{busy}"), {}), ["--listen", "in use"]),
    "admin port in use": (lambda t, busy: (run_args(t, "--admin", f"127.0.0.1:{busy}"), {}), ["--admin", "in use"]),
    "invalid proxy port": (lambda t, _: (run_args(t, "--listen", "127.0.0.1:99999"), {}), ["--listen", "1-65535"]),
    "invalid admin port": (lambda t, _: (run_args(t, "--admin", "127.0.0.1:0x50"), {}), ["--admin", "HOST:PORT"]),
    "not an address here": (
        lambda t, _: (run_args(t, "--listen", "10.255.255.1:18080", "--allow-open-proxy"), {}),
        ["--listen", "not an address of this machine"],
    ),
    "unwritable data dir": (lambda t, _: (run_args(t, "--data-dir", unwritable(t)), {}), ["--data-dir", "writable"]),
    "data dir under a file": (
        lambda t, _: (run_args(t, "--data-dir", str(t / "file" / "d")), {}),
        ["--data-dir", "writable"],
    ),
    "store port not a number": (
        lambda t, _: (run_args(t, "--store", "clickhouse://u:pw@ch:notaport/llmtap"), {}),
        ["--store", "'notaport'"],
    ),
    "store database name": (
        lambda t, _: (run_args(t, "--store", "clickhouse://u:pw@ch:8123/bad-db"), {}),
        ["--store", "database name"],
    ),
    "negative spool": (lambda t, _: (run_args(t, "--spool-max-mb", "-5"), {}), ["--spool-max-mb", "'-5'"]),
    "spool not a number": (lambda t, _: (run_args(t, "--spool-max-mb", "lots"), {}), ["--spool-max-mb", "'lots'"]),
    "spool from the environment": (
        lambda t, _: (run_args(t), {"LLMTAP_SPOOL_MAX_MB": "-1"}),
        ["--spool-max-mb", "$LLMTAP_SPOOL_MAX_MB"],
    ),
    "negative retention": (
        lambda t, _: (run_args(t, "--content-retention-days", "-1"), {}),
        ["--content-retention-days"],
    ),
    "drain timeout": (lambda t, _: (run_args(t, "--drain-timeout", "soon"), {}), ["--drain-timeout", "duration"]),
    "threshold": (lambda t, _: (["check-cost", "--threshold", "abc"], {}), ["--threshold", "20%"]),
    "min samples": (lambda t, _: (["check-cost", "--min-samples", "0"], {}), ["--min-samples", ">= 1"]),
    "window": (lambda t, _: (["check-cost", "--window", "an hour"], {}), ["--window", "30s"]),
    "baseline": (lambda t, _: (["check-cost", "--baseline", "2h", "--admin", ""], {}), ["--baseline", "1d"]),
    "since": (lambda t, _: (["report", "--since", "yesterday"], {}), ["--since", "duration"]),
    "admin address": (lambda t, _: (["sql", "SELECT 1", "--admin", "nonsense:port"], {}), ["--admin", "HOST:PORT"]),
    "unknown store scheme, ports busy": (
        lambda t, busy: (on_busy_ports(t, busy, "--store", "mysql://x"), {}),
        ["llmtap run: --store", "'mysql'"],
    ),
    "store port, ports busy": (
        lambda t, busy: (on_busy_ports(t, busy, "--store", "clickhouse://u:pw@ch:notaport/llmtap"), {}),
        ["--store", "'notaport'"],
    ),
    "read store on chdb, ports busy": (
        lambda t, busy: (on_busy_ports(t, busy, "--read-store", "clickhouse://r:pw@ch:8123/llmtap"), {}),
        ["--read-store"],
    ),
    "upstream CA missing, ports busy": (
        lambda t, busy: (on_busy_ports(t, busy, "--upstream-ca", str(t / "no-ca.pem")), {}),
        ["--upstream-ca", "no such file"],
    ),
    "price file missing, ports busy": (
        lambda t, busy: (on_busy_ports(t, busy, "--prices", str(t / "no-prices.json")), {}),
        ["price file", "no-prices.json"],
    ),
    "store none without OTLP, ports busy": (
        lambda t, busy: (on_busy_ports(t, busy, "--store", "none"), {}),
        ["--store none", "--otlp-endpoint"],
    ),
    "token file": (
        lambda t, _: (run_args(t, "--admin-token-file", str(t / "missing")), {}),
        ["--admin-token-file", "cannot read"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_startup_error_is_one_line_naming_the_flag(case: str, tmp_path: Path, busy_port: int) -> None:
    (tmp_path / "file").write_text("")
    make, needles = CASES[case]
    args, env = make(tmp_path, busy_port)
    r = cli(*args, env=env)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("llmtap "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in r.stderr and "--mode" not in r.stderr
    assert "pw@" not in r.stderr  # a store password is never echoed


def test_a_data_dir_in_use_by_another_sidecar_is_refused(sidecar: Sidecar) -> None:
    r = cli(*run_args(sidecar.data_dir.parent, "--data-dir", str(sidecar.data_dir)))
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert f"--data-dir {sidecar.data_dir}" in line and "in use by another llmtap sidecar" in line
    assert f"admin 127.0.0.1:{sidecar.admin}" in line  # it says which one
    status, _ = sidecar.admin_request("GET", "/healthz")
    assert status == 200  # and the running one is untouched
