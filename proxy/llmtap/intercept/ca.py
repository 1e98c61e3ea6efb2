"""The interception CA and the trust bundles clients and the proxy need."""

from __future__ import annotations

import os
from pathlib import Path

import certifi

CA_BASENAME = "mitmproxy"  # the name mitmproxy looks for in its confdir


def ca_dir(data_dir: Path) -> Path:
    return data_dir / "ca"


def ensure_ca(data_dir: Path) -> Path:
    """Create the CA on first use (private key files mode 0600); return the certificate path."""
    from mitmproxy.certs import CertStore

    d = ca_dir(data_dir)
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    if not (d / f"{CA_BASENAME}-ca.pem").exists():
        CertStore.create_store(d, CA_BASENAME, 2048, organization="llmtap", cn="llmtap interception CA")
    for secret in (f"{CA_BASENAME}-ca.pem", f"{CA_BASENAME}-ca.p12"):
        p = d / secret
        if p.exists():
            os.chmod(p, 0o600)
    return d / f"{CA_BASENAME}-ca-cert.pem"


def _write_bundle(path: Path, parts: list[Path]) -> Path:
    text = "".join(p.read_text().rstrip("\n") + "\n" for p in parts)
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def client_bundle(data_dir: Path) -> Path:
    """certifi's roots + the llmtap CA: non-intercepted hosts still verify with it."""
    cert = ensure_ca(data_dir)
    return _write_bundle(data_dir / "ca-bundle.pem", [Path(certifi.where()), cert])


def upstream_bundle(data_dir: Path, extra: Path) -> Path:
    """certifi's roots + a user CA file, for verifying upstream servers."""
    if not extra.is_file():
        raise FileNotFoundError(f"--upstream-ca: no such file: {extra}")
    return _write_bundle(data_dir / "upstream-ca-bundle.pem", [Path(certifi.where()), extra])
