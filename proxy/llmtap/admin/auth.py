"""Who may ask the admin API: the token, the browser's session cookie, Host and Origin checks, security headers.

- **The token.** Every install has one: ``<data-dir>/admin-token`` (0600), created at the first
  start, read by ``llmtap sql``/``report``/``check-cost`` from the same data dir. ``--admin-token``
  (or ``--admin-token-file``, ``LLMTAP_ADMIN_TOKEN``) sets one explicitly instead. Compared in
  constant time. Data endpoints (``/api/sql``, ``/api/panel``, ``/api/variable``, the viewer's
  ``/api/explain-cost``, ``/api/explain-latency``, ``/api/call``, ``POST /api/session``) always need it;
  ``/metrics`` needs it when it was set explicitly; ``/healthz`` and ``/api/status`` (whether the store
  answers, nothing from it) never do.
- **Browsers** present it once (``POST /api/login``, from the viewer's login box or a
  ``#token=...`` link, whose fragment never reaches a server log) and get an HttpOnly,
  ``SameSite=Strict`` session cookie derived from the token.
- **DNS rebinding**: a request without a valid bearer token must name the admin server by a
  loopback name, an IP address, or a host given with ``--admin-allowed-host``.
- **Cross-site requests**: a request to an API endpoint whose ``Origin`` is not the admin's own,
  or whose ``Sec-Fetch-Site`` is not ``same-origin``/``none``, is refused. There is no CORS.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
import threading
import time
from collections.abc import Mapping
from pathlib import Path

TOKEN_FILE = "admin-token"
COOKIE = "llmtap_admin"
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
    """The install's admin token: read from ``<data-dir>/admin-token``, created (0600) when absent."""
    path = data_dir / TOKEN_FILE
    try:
        token = path.read_text().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
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


class FailureLimiter:
    """At most ``burst`` failed logins, then one more per ``per_s`` seconds: guessing stays slow."""

    def __init__(self, burst: int = 10, per_s: float = 2.0) -> None:
        self.burst, self.per_s = burst, per_s
        self._tokens = float(burst)
        self._t = time.monotonic()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._t) / self.per_s)
        self._t = now

    def allowed(self) -> bool:
        with self._lock:
            self._refill()
            return self._tokens >= 1

    def failed(self) -> None:
        with self._lock:
            self._refill()
            self._tokens = max(self._tokens - 1, 0.0)


class AdminAuth:
    def __init__(self, token: str, explicit: bool = False, allowed_hosts: tuple[str, ...] = ()) -> None:
        if not token:
            raise ValueError("the admin API needs a token")
        self.token = token
        self.explicit = explicit  # set with --admin-token: /metrics needs it too
        self.allowed_hosts = frozenset(host_of(h) for h in allowed_hosts if h.strip())
        self.session = hmac.new(token.encode(), b"llmtap viewer session", hashlib.sha256).hexdigest()
        self.logins = FailureLimiter()

    # -- credentials ----------------------------------------------------------------------------
    def bearer_ok(self, headers: Mapping[str, str]) -> bool:
        auth = headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token.encode())

    def cookie_ok(self, headers: Mapping[str, str]) -> bool:
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and hmac.compare_digest(value.encode(), self.session.encode()):
                return True
        return False

    def authorized(self, headers: Mapping[str, str]) -> bool:
        return self.bearer_ok(headers) or self.cookie_ok(headers)

    def token_ok(self, candidate: str) -> bool:
        """A login attempt (rate-limited: a refused guess costs a token of :class:`FailureLimiter`)."""
        if not self.logins.allowed():
            return False
        ok = hmac.compare_digest(candidate.strip().encode(), self.token.encode())
        if not ok:
            self.logins.failed()
        return ok

    def session_cookie(self) -> str:
        return f"{COOKIE}={self.session}; HttpOnly; SameSite=Strict; Path=/; Max-Age=2592000"

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
