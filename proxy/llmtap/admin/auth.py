"""Who may ask the admin API: the token, the browser's session cookie, Host and Origin checks, security headers.

- **The token.** Every install has one: ``<data-dir>/admin-token`` (0600, enforced at every start:
  a looser file is made 0600, one that cannot be is refused), created at the first start, read by
  ``llmtap sql``/``report``/``check-cost`` from the same data dir. ``--admin-token`` (or
  ``--admin-token-file``, ``LLMTAP_ADMIN_TOKEN``) sets one explicitly instead (a warning when it is
  shorter than :data:`MIN_TOKEN_CHARS`). Compared in constant time. Data endpoints (``/api/sql``,
  ``/api/panel``, ``/api/variable``, the viewer's ``/api/explain-cost``, ``/api/explain-latency``,
  ``/api/call``, ``POST /api/session``) always need it; ``/metrics`` needs it when it was set
  explicitly; ``/healthz`` and ``/api/status`` (whether the store answers, nothing from it) never
  do — but ``/healthz`` says only its status to a request that fails the Host check below.
- **Browsers** present it once (``POST /api/login``, from the viewer's login box or a
  ``#token=...`` link, whose fragment never reaches a server log) and get an HttpOnly,
  ``SameSite=Strict`` cookie naming a session of its own (random, kept in memory for 30 days at
  most, :data:`MAX_SESSIONS` of them): ``POST /api/logout`` ends it, a restart ends them all.
- **Failed guesses** (a wrong token at ``/api/login`` or as a bearer) are budgeted per client
  address (:class:`FailureBudgets`): past the budget a wrong one is answered 429. The right token
  always wins, whatever the budget of its address: another process on the same machine cannot
  lock the operator out by spending it.
- **DNS rebinding**: a request without a valid bearer token must name the admin server by a
  loopback name, an IP address, or a host given with ``--admin-allowed-host``.
- **Cross-site requests**: a request to an API endpoint whose ``Origin`` is not the admin's own,
  or whose ``Sec-Fetch-Site`` is not ``same-origin``/``none``, is refused. There is no CORS.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import secrets
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from ..startup import StartupError

log = logging.getLogger("llmtap.admin")
TOKEN_FILE = "admin-token"
COOKIE = "llmtap_admin"
MIN_TOKEN_CHARS = 22  # a random base64url token of 128 bits; the install's own has 256
SESSION_S = 30 * 86400
MAX_SESSIONS = 1000
Login = Literal["ok", "wrong", "throttled"]
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
SECURITY_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
)


def install_token(data_dir: Path) -> str:
    """The install's admin token: read from ``<data-dir>/admin-token``, created (0600) when absent; an
    existing file readable by others is made 0600 first (refused when it cannot be)."""
    path = data_dir / TOKEN_FILE
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise StartupError(f"{path}: not a regular file (a symlink?): remove it and a new token is created")
        if st.st_mode & 0o077:
            try:
                os.chmod(path, 0o600)
            except OSError as e:
                raise StartupError(
                    f"{path} is readable by others (mode {stat.S_IMODE(st.st_mode):04o}) and cannot be made "
                    f"private ({e.strerror}): chmod 600 it, or remove it and a new token is created"
                ) from None
            log.warning("%s was readable by others (mode %04o): made 0600", path, stat.S_IMODE(st.st_mode))
        token = path.read_text().strip()
        if token:
            return token
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def read_install_token(data_dir: Path) -> str:
    """The token a client on this machine uses: ``<data-dir>/admin-token`` if it is there, else ''."""
    try:
        return (data_dir / TOKEN_FILE).read_text().strip()
    except OSError:
        return ""


def host_of(value: str) -> str:
    """``Host`` header value → the host name or address, lower-cased, without port or brackets."""
    v = value.strip().lower()
    if v.startswith("["):
        return v[1:].partition("]")[0]
    if v.count(":") == 1:
        v = v.partition(":")[0]
    return v.rstrip(".")


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


class FailureBudgets:
    """Per client address: at most ``burst`` failed credential checks, then one more per ``per_s`` seconds.
    The addresses that failed are kept for at most ``max_clients`` of them (the oldest forgotten first)."""

    def __init__(self, burst: int = 10, per_s: float = 2.0, max_clients: int = 10_000) -> None:
        self.burst, self.per_s, self.max_clients = burst, per_s, max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client → (tokens, at)
        self._lock = threading.Lock()
        self.throttled = 0
        self._last_log = 0.0

    def _tokens(self, client: str, now: float) -> float:
        tokens, at = self._buckets.get(client, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - at) / self.per_s)

    def spent(self, client: str) -> bool:
        with self._lock:
            return self._tokens(client, time.monotonic()) < 1

    def failed(self, client: str) -> bool:
        """Counts one failure of ``client``; True when its budget was already spent (the answer is 429)."""
        with self._lock:
            now = time.monotonic()
            tokens = self._tokens(client, now)
            self._buckets[client] = (max(tokens - 1, 0.0), now)
            self._buckets.move_to_end(client)
            while len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)
            if tokens >= 1:
                return False
            self.throttled += 1
            if now - self._last_log > 10:
                self._last_log = now
                log.warning("admin: too many wrong tokens from %s; answering 429", client or "?")
            return True


class Sessions:
    """The viewer's sessions: random ids, kept (as hashes) until they expire, are ended or crowded out."""

    def __init__(self, ttl_s: float = SESSION_S, cap: int = MAX_SESSIONS) -> None:
        self.ttl_s, self.cap = ttl_s, cap
        self._live: OrderedDict[bytes, float] = OrderedDict()  # sha256(id) → expiry (wall clock)
        self._lock = threading.Lock()

    @staticmethod
    def _key(sid: str) -> bytes:
        return hashlib.sha256(sid.encode()).digest()

    def new(self) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            now = time.time()
            self._live[self._key(sid)] = now + self.ttl_s
            while self._live and (len(self._live) > self.cap or next(iter(self._live.values())) <= now):
                self._live.popitem(last=False)
        return sid

    def valid(self, sid: str) -> bool:
        with self._lock:
            expiry = self._live.get(self._key(sid))
            return expiry is not None and expiry > time.time()

    def end(self, sid: str) -> None:
        with self._lock:
            self._live.pop(self._key(sid), None)


class AdminAuth:
    def __init__(self, token: str, explicit: bool = False, allowed_hosts: tuple[str, ...] = ()) -> None:
        if not token:
            raise ValueError("the admin API needs a token")
        self.token = token
        self.explicit = explicit  # set with --admin-token: /metrics needs it too
        self.allowed_hosts = frozenset(host_of(h) for h in allowed_hosts if h.strip())
        self.sessions = Sessions()
        self.failures = FailureBudgets()
        if explicit and len(token) < MIN_TOKEN_CHARS:
            log.warning(
                "the admin token is %d characters: use a random one of %d or more (e.g. openssl rand -base64 32)",
                len(token),
                MIN_TOKEN_CHARS,
            )

    # -- credentials ----------------------------------------------------------------------------
    def _right(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.strip().encode(), self.token.encode())

    def bearer(self, headers: Mapping[str, str], client: str = "") -> Login | None:
        """The bearer token of a request: None when there is none, else as :meth:`login` judges it."""
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self.login(value, client)

    def bearer_ok(self, headers: Mapping[str, str], client: str = "") -> bool:
        return self.bearer(headers, client) == "ok"

    def cookie_ok(self, headers: Mapping[str, str]) -> bool:
        return any(self.sessions.valid(v) for v in _cookies(headers))

    def authorized(self, headers: Mapping[str, str], client: str = "") -> bool:
        return self.bearer_ok(headers, client) or self.cookie_ok(headers)

    def login(self, candidate: str, client: str = "") -> Login:
        """A presented token. The right one always wins; a wrong one spends ``client``'s budget
        (:class:`FailureBudgets`) and, once it is spent, is ``throttled`` (answered 429)."""
        if self._right(candidate):
            return "ok"
        return "throttled" if self.failures.failed(client) else "wrong"

    def session_cookie(self) -> str:
        """A new session's cookie (after a login)."""
        return f"{COOKIE}={self.sessions.new()}; HttpOnly; SameSite=Strict; Path=/; Max-Age={SESSION_S}"

    def logout(self, headers: Mapping[str, str]) -> None:
        """Ends the sessions the request's cookies name: their cookies are worthless from now on."""
        for v in _cookies(headers):
            self.sessions.end(v)

    # -- where the request comes from ---------------------------------------------------------------
    def host_ok(self, headers: Mapping[str, str]) -> bool:
        """The Host names this server the way a DNS-rebinding page cannot: loopback, an IP, or configured."""
        host = host_of(headers.get("host", ""))
        if not host:
            return False
        return host in LOOPBACK_NAMES or host.endswith(".localhost") or is_ip(host) or host in self.allowed_hosts

    @staticmethod
    def same_origin(headers: Mapping[str, str]) -> bool:
        """Not a cross-site browser request (non-browser clients send neither header)."""
        site = headers.get("sec-fetch-site", "").strip().lower()
        if site and site not in ("same-origin", "none"):
            return False
        origin = headers.get("origin", "").strip().lower()
        if origin:
            return origin in (f"http://{headers.get('host', '').strip().lower()}",)
        return True


def _cookies(headers: Mapping[str, str]) -> list[str]:
    """The values of every ``llmtap_admin`` cookie of a request."""
    out = []
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            out.append(value)
    return out
