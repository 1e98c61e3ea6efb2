"""What a sidecar checks and claims before it takes traffic, and what the read commands read back.

- :func:`check_port`: ``--listen`` / ``--admin`` must be free, said in one line naming the flag
  (before anything is built: mitmproxy's own message suggests a ``--mode`` flag llmtap does not have).
- :func:`prepare_data_dir` + :class:`DataDirLock`: one sidecar per data dir (its spool, CA and
  secret are not shareable). The lock is an ``flock`` on ``<data-dir>/llmtap.lock``, held for the
  life of the process (the kernel drops it when the process dies, so a stale file locks nothing);
  the file names the holder's pid, addresses and store.
- :func:`store_identity` / :func:`store_id`: the store a URL designates, without credentials. A
  sidecar reports the id on ``/healthz``; ``sql``/``report``/``check-cost`` use a sidecar's admin
  API only when it serves the store they were asked for.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import json
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .errors import StartupError

LOCK_NAME = "llmtap.lock"


def die_with_parent() -> None:
    """``PR_SET_PDEATHSIG``: the kernel kills this process when its parent dies (even by SIGKILL): the sidecar's
    child processes (proxy workers, the store's engine) never outlive it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # not Linux: a closed channel still stops them
        pass


def check_port(flag: str, host: str, port: int) -> None:
    """Bind and release ``host:port`` the way the servers will (``SO_REUSEADDR``)."""
    _bind(flag, host, port).close()


def bind_listener(flag: str, host: str, port: int, backlog: int = 1024) -> socket.socket:
    """The proxy's listening socket, bound once by the supervisor and shared by its workers."""
    s = _bind(flag, host, port)
    s.listen(backlog)
    s.set_inheritable(True)
    return s


def _bind(flag: str, host: str, port: int) -> socket.socket:
    if not 0 < port < 65536:
        raise StartupError(f"{flag} {host}:{port}: the port must be 1-65535")
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise StartupError(f"{flag} {host}:{port}: cannot resolve {host!r} ({e.strerror}): give an address") from None
    family, kind, proto, _, sockaddr = infos[0]
    s = socket.socket(family, kind, proto)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(sockaddr)
    except OSError as e:
        s.close()
        if e.errno == errno.EADDRINUSE:
            raise StartupError(
                f"{flag} {host}:{port}: the address is already in use (another llmtap, or another server): "
                f"stop it or pick a free port with {flag} HOST:PORT"
            ) from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise StartupError(f"{flag} {host}:{port}: {host} is not an address of this machine") from None
        if e.errno == errno.EACCES:
            raise StartupError(
                f"{flag} {host}:{port}: permission denied (ports below 1024 need privileges): use a port >= 1024"
            ) from None
        raise StartupError(f"{flag} {host}:{port}: cannot listen: {e.strerror}") from None
    return s


def prepare_data_dir(path: Path) -> None:
    """Create ``path`` (mode 0700) and prove it writable, or say which flag to change."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o700)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise StartupError(
            f"--data-dir {path}: not a writable directory ({e.strerror}): "
            "pick one this user can write (or fix its owner and mode)"
        ) from None


@dataclass
class LockInfo:
    pid: int
    listen: str
    admin: str
    store: str  # store_identity(): no credentials
    store_id: str
    started: float

    @property
    def admin_connect(self) -> str:
        """Where a local client reaches the holder's admin API (a wildcard bind answers on loopback)."""
        host, _, port = self.admin.rpartition(":")
        host = host.strip("[]")
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class DataDirLock:
    """The exclusive lock of a running sidecar on its data dir."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self, listen: tuple[str, int], admin: tuple[str, int], store_url: str) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            holder = read_lock(self.path.parent)
            who = f" (pid {holder.pid}, proxy {holder.listen}, admin {holder.admin})" if holder else ""
            raise StartupError(
                f"--data-dir {self.path.parent}: in use by another llmtap sidecar{who}: "
                "stop it, or give this one its own --data-dir"
            ) from None
        info = {
            "pid": os.getpid(),
            "listen": _fmt(listen),
            "admin": _fmt(admin),
            "store": store_identity(store_url),
            "store_id": store_id(store_url),
            "started": time.time(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # drops the flock; the file stays (it locks nothing by itself)
            self._fd = None


def read_lock(data_dir: Path) -> LockInfo | None:
    """The sidecar holding ``data_dir``'s lock, or None when none runs there."""
    path = data_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            pass  # held: a sidecar runs
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        raw: dict[str, Any] = {}
        for _ in range(20):  # the holder writes its details right after taking the lock
            try:
                raw = json.loads(os.pread(fd, 65536, 0) or b"{}")
            except ValueError:
                raw = {}
            if raw:
                break
            time.sleep(0.05)
        try:
            return LockInfo(
                int(raw["pid"]),
                str(raw["listen"]),
                str(raw["admin"]),
                str(raw["store"]),
                str(raw["store_id"]),
                float(raw["started"]),
            )
        except (KeyError, TypeError, ValueError):
            return LockInfo(0, "?", "?", "?", "", 0.0)
    finally:
        os.close(fd)


def _fmt(addr: tuple[str, int]) -> str:
    host, port = addr
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def store_identity(url: str) -> str:
    """The store ``url`` designates, comparable and without credentials.

    ``chdb://PATH`` → the absolute path; ``clickhouse[s]://user:pass@host:port/db`` → scheme, user,
    host, port (its default filled in) and database; ``none`` → ``none``.
    """
    text = url.strip()
    if text.lower() == "none":
        return "none"
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme == "chdb":
        return "chdb://" + str(Path(text[len("chdb://") :]).expanduser().resolve())
    if scheme in ("clickhouse", "clickhouses"):
        from .store.schema import DEFAULT_DB

        u = urlsplit(text)
        try:
            port = u.port or (8443 if scheme == "clickhouses" else 8123)
        except ValueError:
            port = 0
        user = u.username or "default"
        return f"{scheme}://{user}@{(u.hostname or '').lower()}:{port}/{u.path.strip('/') or DEFAULT_DB}"
    return text


def store_id(url: str) -> str:
    return hashlib.sha256(store_identity(url).encode()).hexdigest()[:16]
