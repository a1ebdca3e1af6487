"""TLS for the development clusters: one certificate authority of devenv's own (``.run/tls``), made once,
and a server certificate it signs for 127.0.0.1, ::1 and localhost that every monitored cluster presents.
The console's default (sslmode=require) then holds against them as against a production server, and a test
can verify them (verify-full) by giving the console this CA, or fail to by giving it another (``new_ca``)."""

from __future__ import annotations

import datetime
import fcntl
import ipaddress
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from .paths import RUN_DIR

TLS_DIR = RUN_DIR / "tls"
SERVER_NAMES = ("localhost",)
SERVER_ADDRESSES = ("127.0.0.1", "::1")
_made = threading.Lock()  # clusters start in threads (fleet.start_many), tests in processes: one CA for all


@dataclass(frozen=True)
class Authority:
    """A CA: its certificate (PEM) and private key (PEM)."""

    cert_pem: str
    key_pem: str


def new_ca(common_name: str = "pgconsole devenv CA") -> Authority:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Authority(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM).decode(),
        key_pem=_key_pem(key),
    )


def server_certificate(
    ca: Authority, names: tuple[str, ...] = SERVER_NAMES, addresses: tuple[str, ...] = SERVER_ADDRESSES
) -> tuple[str, str]:
    """A server certificate and its key (PEM), signed by `ca`, for these host names and addresses."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    alt = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, (names or addresses)[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key)


def _key_pem(key) -> str:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _write(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def devenv_tls(folder: Path = TLS_DIR) -> Path:
    """The folder holding devenv's CA (ca.crt) and the clusters' server.crt / server.key, made on first use."""
    if (folder / "server.key").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with _made, open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "server.key").exists():
            return folder
        ca = new_ca()
        cert, key = server_certificate(ca)
        _write(folder / "ca.crt", ca.cert_pem, 0o644)
        _write(folder / "ca.key", ca.key_pem, 0o600)
        _write(folder / "server.crt", cert, 0o644)
        _write(folder / "server.key", key, 0o600)  # written last: its presence says the set is whole
    return folder


def ca_pem() -> str:
    """devenv's CA certificate: what a console verifying the development clusters is given."""
    return (devenv_tls() / "ca.crt").read_text()
