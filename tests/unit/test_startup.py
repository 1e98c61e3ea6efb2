"""What a sidecar checks and claims before it takes traffic (``startup.py``, ``app.check_*``), in-process:
each refusal is a one-line error naming the flag to change."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmtap.app import check_alerts, check_exposure, is_loopback, real_credentials
from llmtap.config import RunConfig
from llmtap.errors import ConfigError, LlmtapError, StartupError
from llmtap.startup import DataDirLock, LockInfo, check_port, prepare_data_dir, read_lock, store_id, store_identity


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something else listens on (bound the way servers bind: SO_REUSEADDR)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def test_a_free_port_passes_and_is_left_free() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    check_port("--listen", "127.0.0.1", port)
    with socket.socket() as again:  # released: the server can bind it next
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("host", "port", "needle"),
    [
        ("127.0.0.1", 0, "1-65535"),
        ("127.0.0.1", 65536, "1-65535"),
        ("no-such-host.invalid", 8080, "cannot resolve"),
        ("10.255.255.1", 18080, "not an address of this machine"),
    ],
)
def test_a_port_that_cannot_be_listened_on_names_the_flag(host: str, port: int, needle: str) -> None:
    with pytest.raises(StartupError, match=needle) as e:
        check_port("--admin", host, port)
    assert str(e.value).startswith(f"--admin {host}:{port}: ") and "\n" not in str(e.value)


def test_a_port_in_use_says_so(busy_port: int) -> None:
    with pytest.raises(StartupError, match="already in use") as e:
        check_port("--listen", "127.0.0.1", busy_port)
    assert "pick a free port with --listen" in str(e.value)


def test_the_data_dir_is_made_private_and_proven_writable(tmp_path: Path) -> None:
    d = tmp_path / "a" / "data"
    prepare_data_dir(d)
    assert d.is_dir() and (d.stat().st_mode & 0o777) == 0o700 and not list(d.iterdir())
    (tmp_path / "file").write_text("")
    with pytest.raises(StartupError, match="not a writable directory") as e:
        prepare_data_dir(tmp_path / "file" / "data")
    assert str(e.value).startswith(f"--data-dir {tmp_path / 'file' / 'data'}: ")


def test_a_read_only_data_dir_is_refused(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(0o500)
    if os.geteuid() == 0:  # root writes through modes: a directory of a read-only kernel file system
        ro = Path("/sys/kernel")
    with pytest.raises(StartupError, match="writable"):
        prepare_data_dir(ro / "data")


def test_one_sidecar_per_data_dir_and_the_lock_names_it(tmp_path: Path) -> None:
    assert read_lock(tmp_path) is None
    lock = DataDirLock(tmp_path)
    lock.acquire(("127.0.0.1", 8080), ("0.0.0.0", 9464), f"chdb://{tmp_path}/store")
    try:
        holder = read_lock(tmp_path)
        assert holder is not None
        assert (holder.pid, holder.listen, holder.admin) == (os.getpid(), "127.0.0.1:8080", "0.0.0.0:9464")
        assert holder.store_id == store_id(f"chdb://{tmp_path}/store") and holder.admin_connect == "127.0.0.1:9464"
        with pytest.raises(StartupError, match="in use by another llmtap sidecar") as e:
            DataDirLock(tmp_path).acquire(("127.0.0.1", 8081), ("127.0.0.1", 9465), "none")
        assert f"pid {os.getpid()}, proxy 127.0.0.1:8080, admin 0.0.0.0:9464" in str(e.value)
    finally:
        lock.release()
    assert read_lock(tmp_path) is None  # the file stays, but locks nothing
    assert (tmp_path / "llmtap.lock").exists()


@pytest.mark.parametrize(
    ("admin", "connect"),
    [("0.0.0.0:9464", "127.0.0.1:9464"), ("[::]:9464", "[::1]:9464"), ("10.0.0.5:9464", "10.0.0.5:9464")],
)
def test_a_wildcard_admin_bind_is_reached_on_loopback(admin: str, connect: str) -> None:
    assert LockInfo(1, "", admin, "", "", 0.0).admin_connect == connect


def test_a_store_is_identified_without_its_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert store_identity("chdb://./data/store") == f"chdb://{tmp_path}/data/store"
    assert store_identity("clickhouse://u:pw@CH:8123/llmtap") == "clickhouse://u@ch:8123/llmtap"
    assert store_identity("clickhouses://ch") == "clickhouses://default@ch:8443/llmtap"
    assert store_identity(" NONE ") == "none"
    assert store_id("clickhouse://u:pw@ch/llmtap") == store_id("clickhouse://u:other@ch:8123/llmtap")
    assert store_id("clickhouse://u:pw@ch/a") != store_id("clickhouse://u:pw@ch/b")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("::1", True), ("localhost", True), ("127.0.0.2", True), ("0.0.0.0", False),
     ("", False), ("10.0.0.1", False), ("example.com", False)],
)  # fmt: skip
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("spec", "real"),
    [("user:pass", True), ("@/etc/htpasswd", True), ("ldaps:ldap.example.com", True), ("any", False),
     ("user:", False), (":pass", False), ("@", False), ("", False)],
)  # fmt: skip
def test_real_proxy_credentials(spec: str, real: bool) -> None:
    assert real_credentials(spec) is real


def test_an_open_proxy_is_refused_unless_it_has_credentials_or_is_allowed() -> None:
    public = RunConfig(listen=("0.0.0.0", 8080))
    with pytest.raises(ConfigError, match=r"refusing to listen on 0\.0\.0\.0") as e:
        check_exposure(public)
    assert "--proxy-auth" in str(e.value) and "--allow-open-proxy" in str(e.value)
    with pytest.raises(ConfigError):
        check_exposure(RunConfig(listen=("0.0.0.0", 8080), proxy_auth="any"))
    check_exposure(RunConfig(listen=("0.0.0.0", 8080), proxy_auth="u:p"))
    check_exposure(RunConfig(listen=("0.0.0.0", 8080), allow_open_proxy=True))
    check_exposure(RunConfig())


def test_a_public_admin_api_needs_its_token() -> None:
    with pytest.raises(ConfigError, match=r"admin API on 0\.0\.0\.0 without --admin-token"):
        check_exposure(RunConfig(admin=("0.0.0.0", 9464)))
    check_exposure(RunConfig(admin=("0.0.0.0", 9464), admin_token="t"))


def test_alerts_need_a_url_and_a_store() -> None:
    check_alerts(RunConfig())  # no webhook: nothing to check
    check_alerts(RunConfig(alert_webhook="https://hooks.example.com/x"))
    with pytest.raises(ConfigError, match="http"):
        check_alerts(RunConfig(alert_webhook="ftp://hooks.example.com/x"))
    with pytest.raises(ConfigError, match="needs a store"):
        check_alerts(RunConfig(alert_webhook="https://hooks.example.com/x", store="none"))


def test_every_refusal_is_an_llmtap_error_the_cli_prints_as_one_line() -> None:
    assert issubclass(StartupError, LlmtapError) and issubclass(ConfigError, StartupError)
