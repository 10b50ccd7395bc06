"""Test certificates for the endpoints: a self-signed ECDSA P-256 certificate.

ECDSA P-256 because every stack we drive accepts it (Ed25519 is not universal).
Clients do not verify the server (the interop-runner convention), so one
certificate per run is enough; it is written as `cert.pem` and `priv.key`, the
names the endpoint contract (docs/endpoints.md) and QIR images expect.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SERVER_NAME = "server.longlook.test"


def padding_names(name: str, padding: int) -> list[x509.DNSName]:
    """`name` and enough more DNS names under it to add about `padding` bytes to a
    certificate: every stack accepts subject alternative names it does not use."""
    extra = [x509.DNSName(f"pad{i:04d}.{name}") for i in range(max(padding, 0) // (len(name) + 10))]
    return [x509.DNSName(name), *extra]


def write_certs(directory: Path, name: str = SERVER_NAME, padding: int = 0) -> tuple[Path, Path]:
    """Writes cert.pem and priv.key into `directory` (created if missing), the
    certificate `padding` bytes larger than it need be (padding_names).

    Returns (certificate path, key path). Existing files are reused, so callers
    may call this once per run without cost.
    """
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "cert.pem", directory / "priv.key"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(padding_names(name, padding)), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path
