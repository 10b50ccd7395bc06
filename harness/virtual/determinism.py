"""Seeded randomness and a virtual clock for aioquic, so a virtual run is a pure
function of (schedule, plan, seed).

aioquic draws from four places: `os.urandom` (connection IDs, reset tokens, TLS
randoms, tickets, path challenges, the long header's grease bits), X25519/X448 key
generation, EC key generation for the P-256/P-384 key shares, and the server's
CertificateVerify signature. The first three are replaced, only inside aioquic's
own modules, by draws from one seeded stream. The signature is made deterministic
with RFC 6979 ECDSA rather than an Ed25519 certificate: the certificate stays the
ECDSA P-256 kind the real-time testbed uses (harness/testbed/certs.py), so the server's
first flight has the same size and packetisation as in real time (an Ed25519
certificate is ~150 bytes smaller, which let the whole flight fit one datagram and
changed the handshake's packet layout). Wall-clock reads (qlog event times, TLS
ticket ages) read the virtual clock instead.

Nothing outside aioquic is touched, and `deterministic_aioquic` restores every
patched name on exit, so Hypothesis and the rest of the process keep real entropy.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import random
import sys
import types
from pathlib import Path
from typing import Callable, Iterator

#: Virtual time 0 on the wall clock, ns (2023-11-14T22:13:20Z): fixed, so traces and
#: captures carry no real wall-clock time, and far enough from 0 that qlog readers
#: recognise epoch values (harness/observe/dialects/_clock.py).
EPOCH_UNIX_NS = 1_700_000_000_000_000_000


class SeededEntropy:
    """One deterministic byte stream standing in for the OS's entropy."""

    def __init__(self, seed: int):
        self._rng = random.Random(f"longlook-virtual:{seed}")

    def urandom(self, n: int) -> bytes:
        return self._rng.randbytes(n)

    def below(self, bits: int) -> int:
        """A uniform integer in [1, 2**bits)."""
        return self._rng.getrandbits(bits) or 1


def _key_modules(entropy: SeededEntropy):
    """Stand-ins for aioquic.tls's `x25519`, `x448` and `ec` module references."""
    from cryptography.hazmat.primitives.asymmetric import ec, x448, x25519

    class X25519Key:
        @staticmethod
        def generate():
            return x25519.X25519PrivateKey.from_private_bytes(entropy.urandom(32))

    class X448Key:
        @staticmethod
        def generate():
            return x448.X448PrivateKey.from_private_bytes(entropy.urandom(56))

    def generate_private_key(curve, backend=None):
        # One bit short of the curve's size keeps the scalar below the group order.
        return ec.derive_private_key(entropy.below(curve.key_size - 1), curve)

    def deterministic_ecdsa(algorithm, deterministic_signing=True):
        return ec.ECDSA(algorithm, deterministic_signing=True)

    x25519_shim = types.SimpleNamespace(**{**vars(x25519), "X25519PrivateKey": X25519Key})
    x448_shim = types.SimpleNamespace(**{**vars(x448), "X448PrivateKey": X448Key})
    ec_shim = types.SimpleNamespace(**{**vars(ec), "generate_private_key": generate_private_key,
                                       "ECDSA": deterministic_ecdsa})
    return x25519_shim, x448_shim, ec_shim


@contextlib.contextmanager
def deterministic_aioquic(seed: int, now_ns: Callable[[], int]) -> Iterator[SeededEntropy]:
    """Within the block, aioquic draws from `seed` and reads the clock `now_ns`
    (virtual ns since the link's start). Not re-entrant: one virtual run at a time
    per process (the patched names are module globals)."""
    import os as real_os
    import time as real_time

    import aioquic.quic.logger as logger
    import aioquic.tls as tls

    for name in ("aioquic.quic.connection", "aioquic.quic.packet", "aioquic.quic.retry"):
        importlib.import_module(name)  # loaded now, so that their `os` is patched below

    entropy = SeededEntropy(seed)
    os_shim = types.SimpleNamespace(**{**vars(real_os), "urandom": entropy.urandom})

    def wall_s() -> float:
        return (EPOCH_UNIX_NS + now_ns()) / 1e9

    time_shim = types.SimpleNamespace(**{**vars(real_time), "time": wall_s})

    def utcnow() -> datetime.datetime:
        return datetime.datetime.fromtimestamp(wall_s(), datetime.timezone.utc)

    x25519_shim, x448_shim, ec_shim = _key_modules(entropy)
    # Every aioquic module that imported os draws its randomness through it (which
    # ones differs between releases: retry.py imports it in recent ones only).
    import_os = [m for name, m in sorted(sys.modules.items())
                 if name.split(".")[0] == "aioquic" and getattr(m, "os", None) is real_os]
    patches = [
        *((m, "os", os_shim) for m in import_os),
        (tls, "x25519", x25519_shim), (tls, "x448", x448_shim), (tls, "ec", ec_shim),
        (tls, "utcnow", utcnow), (logger, "time", time_shim),
    ]
    saved = [(mod, name, getattr(mod, name)) for mod, name, _ in patches]
    try:
        for mod, name, value in patches:
            setattr(mod, name, value)
        yield entropy
    finally:
        for mod, name, value in saved:
            setattr(mod, name, value)


def write_cert(directory: Path, name: str, seed: int, padding: int = 0) -> tuple[Path, Path]:
    """A self-signed ECDSA P-256 certificate (as harness/testbed/certs.py) whose bytes depend
    only on `seed`: derived key, fixed serial and validity around EPOCH_UNIX_NS,
    RFC 6979 signature. Returns (cert, key) paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from harness.testbed.certs import padding_names

    directory.mkdir(parents=True, exist_ok=True)
    rng = SeededEntropy(seed ^ 0x5EED)
    key = ec.derive_private_key(rng.below(255), ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    epoch = datetime.datetime.fromtimestamp(EPOCH_UNIX_NS / 1e9, datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(rng.below(63))
        .not_valid_before(epoch - datetime.timedelta(days=1))
        .not_valid_after(epoch + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(padding_names(name, padding)), critical=False)
        .sign(key, hashes.SHA256(), ecdsa_deterministic=True)
    )
    cert_path, key_path = directory / "cert.pem", directory / "priv.key"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path
