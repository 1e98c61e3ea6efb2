"""Attribution (who made the call) and credential fingerprints (which key paid).

``x-llmtap-*`` headers are read here and stripped by the addon before the request
goes upstream. Credentials are never kept: only a keyed, non-reversible
fingerprint (HMAC-SHA256 with a per-install secret) identifies the key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import parse_qsl, unquote

from ..safetext import safe_text

ATTRIBUTION_HEADERS = {
    "x-llmtap-service": "service",
    "x-llmtap-user": "user_id",
    "x-llmtap-session": "session_id",
    "x-llmtap-tenant": "tenant",
    "x-llmtap-feature": "feature",
    "x-llmtap-prompt-version": "prompt_version",
}
# Headers other tools already send, read (never stripped) when ours are absent; in this order
# (the contract's), then Codex's own session headers.
FOREIGN_SESSION_HEADERS = (
    "x-claude-code-session-id",
    "helicone-session-id",
    "x-session-id",
    "langfuse-session-id",
    "session-id",
    "session_id",
)
FOREIGN_USER_HEADERS = ("helicone-user-id",)

CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization")
CREDENTIAL_QUERY_KEYS = ("key", "api-key", "api_key")


_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


def sigv4_signed_headers(authorization: str) -> frozenset[str]:
    """Header names an AWS SigV4 signature covers (``SignedHeaders=a;b;c``): never stripped."""
    if not authorization.startswith("AWS4-HMAC-SHA256"):
        return frozenset()
    m = re.search(r"SignedHeaders=([^,\s]+)", authorization)
    return frozenset(m.group(1).lower().split(";")) if m else frozenset()


def strippable(header_names: frozenset[str], authorization: str) -> list[str]:
    """The attribution headers present on a request that may be removed before it goes upstream."""
    signed = sigv4_signed_headers(authorization)
    return [name for name in ATTRIBUTION_HEADERS if name in header_names and name not in signed]


def trace_ids(traceparent: str) -> tuple[str, str]:
    """(trace id, parent span id) for the call's span: the app's trace when it sent a W3C
    ``traceparent``, else a new trace."""
    m = _TRACEPARENT.match(traceparent.strip().lower()) if traceparent else None
    if m and m.group(1) != "0" * 32:
        return m.group(1), m.group(2)
    return secrets.token_hex(16), ""


def read_attribution(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    sessions: dict[str, str] = {}
    users: dict[str, str] = {}
    for k, v in headers:
        field = ATTRIBUTION_HEADERS.get(k)
        if field and v:
            out[field] = safe_text(v[:256])
        elif k in FOREIGN_SESSION_HEADERS and v:
            sessions.setdefault(k, safe_text(v[:256]))
        elif k in FOREIGN_USER_HEADERS and v:
            users.setdefault(k, safe_text(v[:256]))
    for name in FOREIGN_SESSION_HEADERS:
        if name in sessions:
            out.setdefault("session_id", sessions[name])
            break
    for name in FOREIGN_USER_HEADERS:
        if name in users:
            out.setdefault("user_id", users[name])
            break
    return out


_SAFE_NAME = re.compile(r"[^\x21-\x7e ]")


def proxy_user(proxy_authorization: str) -> tuple[str, str]:
    """(user, password) of a ``Proxy-Authorization: Basic …`` value; ``("", "")`` if there is none.

    The user part of the proxy URL names the calling service (``http://SERVICE:x@host:port``).
    It arrives percent-decoded from most clients; a still-encoded one is decoded here.
    """
    scheme, _, value = proxy_authorization.strip().partition(" ")
    if scheme.lower() != "basic" or not value:
        return "", ""
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return "", ""
    user, _, password = decoded.partition(":")
    user = _SAFE_NAME.sub("", unquote(user)).strip()
    return user[:128], password


class Fingerprinter:
    """Keyed fingerprints of credentials; the secret lives in the data dir (mode 0600)."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    @classmethod
    def from_data_dir(cls, data_dir: Path) -> Fingerprinter:
        path = data_dir / "install-secret"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
        os.chmod(path, 0o600)
        return cls(path.read_bytes())

    def fingerprint(self, credential: str) -> str:
        return hmac.new(self._secret, credential.encode(), hashlib.sha256).hexdigest()[:16]

    def api_key_id(self, headers: Iterable[tuple[str, str]], query: str = "") -> str:
        for k, v in headers:
            if not v or k not in CREDENTIAL_HEADERS[:4]:
                continue
            if k == "authorization" and v.startswith("AWS4-HMAC-SHA256"):
                # SigV4: the access key id is the stable identity, the signature changes per request.
                cred = v.split("Credential=", 1)[-1].split("/", 1)[0]
                return self.fingerprint(cred.strip())
            token = v.split(" ", 1)[1] if k == "authorization" and " " in v else v
            return self.fingerprint(token.strip())
        if query:
            for k, v in parse_qsl(query):
                if k in CREDENTIAL_QUERY_KEYS and v:
                    return self.fingerprint(v)
        return ""
