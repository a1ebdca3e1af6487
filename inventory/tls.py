"""How the console trusts a monitored server's certificate: the CA a server's certificate must chain to.

A server's `ssl_root_cert` is empty (libpq's default: root.crt in the console account's ~/.postgresql), the
word `system` (the machine's trusted roots, as libpq's sslrootcert=system: only with verify-full), or the CA
certificates themselves in PEM, kept in the database with the server. libpq reads a CA only from a file: the
PEM is written once to TLS_CA_DIR under a name taken from its content, so a changed certificate is a new file
(and a new connection string, which ends a kept connection) and two servers with the same CA share one.
"""

from __future__ import annotations

import hashlib
import os
import ssl
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

SYSTEM = "system"
MAX_PEM_BYTES = 64 * 1024
VERIFYING = ("verify-ca", "verify-full")
# Where distributions keep the bundle, should Python's OpenSSL not say: Debian and Ubuntu, Fedora and RHEL, Alpine.
DISTRIBUTION_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")


def normalized(value: str | None) -> str:
    """The field as stored: a pasted certificate's CRLF line ends (a browser's textarea sends them) and its
    surrounding blanks do not make it another certificate."""
    return (value or "").replace("\r\n", "\n").strip()


def clean_root_cert(value: str, *, sslmode: str) -> str:
    """The field as stored (normalized), or a ValidationError in the DBA's words."""
    value = normalized(value)
    if not value:
        return ""
    if value == SYSTEM:
        if sslmode != "verify-full":
            raise ValidationError(
                {
                    "ssl_root_cert": "the system's trusted roots are used with sslmode verify-full only (a public CA "
                    "signs for a name: verify-ca would take any server it signed for)"
                }
            )
        return value
    if "-----BEGIN CERTIFICATE-----" not in value:
        raise ValidationError(
            {
                "ssl_root_cert": "give the CA certificate itself (PEM, from -----BEGIN CERTIFICATE-----), or the word "
                "system; a path on the console's machine is not accepted"
            }
        )
    if any("PRIVATE KEY" in line for line in value.splitlines()):
        raise ValidationError({"ssl_root_cert": "this holds a private key: give only the CA's certificate"})
    if len(value.encode()) > MAX_PEM_BYTES:
        raise ValidationError({"ssl_root_cert": f"the CA certificates exceed {MAX_PEM_BYTES // 1024} KB"})
    from cryptography import x509

    try:
        certificates = x509.load_pem_x509_certificates(value.encode())
    except ValueError as exc:
        raise ValidationError({"ssl_root_cert": f"not a readable PEM certificate: {exc}"}) from exc
    if sslmode not in VERIFYING:
        raise ValidationError(
            {
                "sslmode": f"a CA certificate is used to verify the server: choose sslmode verify-full (or verify-ca), "
                f"not {sslmode}"
            }
        )
    if not certificates:
        raise ValidationError({"ssl_root_cert": "no certificate in this PEM text"})
    return value


def system_roots() -> str:
    """The machine's bundle of trusted roots, as Python's OpenSSL finds it (SSL_CERT_FILE first). libpq's own
    `system` would ask the OpenSSL libpq was built with, which in psycopg's binary wheel looks in a folder of
    its own that no distribution fills."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile, *DISTRIBUTION_BUNDLES):
        if candidate and os.path.isfile(candidate):
            return candidate
    return SYSTEM  # libpq's own lookup, and its error if it finds nothing


def root_cert_file(value: str) -> str | None:
    """What libpq's sslrootcert gets for a server's field: None (libpq's default), the system bundle, or a
    file holding the PEM."""
    if not value:
        return None
    if value == SYSTEM:
        return system_roots()
    folder = Path(settings.TLS_CA_DIR)
    path = folder / f"{hashlib.sha256(value.encode()).hexdigest()}.crt"
    if not path.exists():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(value)
        os.replace(tmp, path)
    return str(path)
