"""The mock's TLS: its own CA and a leaf certificate for the providers' host names."""

from __future__ import annotations

import datetime
from pathlib import Path

from ...providers import PROVIDERS, known_hosts, plain_name

# Every host the mock stands in for (llmtap run --connect-to HOST:443:127.0.0.1:PORT for each): a real
# name for each host pattern of the provider table.
HOSTS: tuple[str, ...] = tuple(known_hosts())
# Names of its own: self-hosted servers and gateways and proxies reached with --intercept (an Azure APIM,
# a Vertex proxy).
OWN_NAMES = ("localhost", "ollama.internal", "*.gateway.internal")
_ANY_LABEL = "[a-z0-9-]+\\."


def _wildcards() -> list[str]:
    """``*.openai.azure.com`` for a pattern whose first label is any label: other resources' names too."""
    out = []
    for p in PROVIDERS:
        for pattern in p.hosts:
            rest = plain_name(pattern.removeprefix(_ANY_LABEL)) if pattern.startswith(_ANY_LABEL) else None
            if rest:
                out.append("*." + rest)
    return out


CERT_NAMES: tuple[str, ...] = (*HOSTS, *_wildcards(), *OWN_NAMES)  # the names on the mock's certificate


# -- TLS ----------------------------------------------------------------------------


def ensure_certs(cert_dir: Path) -> tuple[Path, Path, Path]:
    """(ca cert, leaf cert, leaf key) in cert_dir, created once."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    cert_dir.mkdir(parents=True, exist_ok=True)
    ca_path, crt_path, key_path = (
        cert_dir / "mock-ca.pem",
        cert_dir / "mock-leaf.pem",
        cert_dir / "mock-leaf.key",
    )
    if ca_path.exists() and crt_path.exists() and key_path.exists():
        return ca_path, crt_path, key_path
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llmtap mock provider CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    import ipaddress

    sans: list[x509.GeneralName] = [x509.DNSName(h) for h in CERT_NAMES]
    sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llmtap mock provider")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    crt_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return ca_path, crt_path, key_path
