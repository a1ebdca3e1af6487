"""inventory.tls: a server's CA field is empty, the word system (verify-full only), or CA certificates in PEM
(a verifying sslmode only), stored normalized and refused otherwise in the DBA's words; libpq then gets None, the
machine's bundle, or a file named by the PEM's content, written once. Certificates are devenv's (devenv/tls.py)."""

import hashlib
import os
import ssl

import pytest
from django.core.exceptions import ValidationError

from devenv import tls as devenv_tls
from inventory.tls import MAX_PEM_BYTES, SYSTEM, clean_root_cert, normalized, root_cert_file, system_roots

CA, OTHER_CA = devenv_tls.new_ca("a CA"), devenv_tls.new_ca("another CA")


def refusal(value: str, sslmode: str = "verify-full") -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as refused:
        clean_root_cert(value, sslmode=sslmode)
    return refused.value.message_dict


def test_normalized_drops_crlf_and_surrounding_blanks_only():
    assert normalized(None) == normalized("") == normalized(" \r\n\t") == ""
    pasted = "\r\n  " + CA.cert_pem.replace("\n", "\r\n") + "  \r\n"
    assert normalized(pasted) == CA.cert_pem.strip()
    assert normalized("a \r\n b\rc") == "a \n b\rc"  # a lone CR is not a line end it rewrites


@pytest.mark.parametrize("sslmode", ["verify-ca", "verify-full"])
def test_ca_certificates_pasted_for_a_verifying_sslmode_are_kept_normalized(sslmode):
    bundle = CA.cert_pem + OTHER_CA.cert_pem
    assert clean_root_cert(bundle.replace("\n", "\r\n") + "\n", sslmode=sslmode) == bundle.strip()
    assert clean_root_cert("  \r\n", sslmode=sslmode) == ""


def test_the_system_roots_are_for_verify_full_only():
    assert clean_root_cert(f" {SYSTEM}\r\n", sslmode="verify-full") == SYSTEM
    for sslmode in ("verify-ca", "require"):
        assert "used with sslmode verify-full only" in refusal(SYSTEM, sslmode)["ssl_root_cert"][0]


def test_a_certificate_with_an_sslmode_that_does_not_verify_asks_for_one_that_does():
    assert refusal(CA.cert_pem, "require") == {
        "sslmode": [
            "a CA certificate is used to verify the server: choose sslmode verify-full (or verify-ca), not require"
        ]
    }


@pytest.mark.parametrize(
    "value, words",
    [
        ("/etc/ssl/certs/ca.pem", "give the CA certificate itself (PEM, from -----BEGIN CERTIFICATE-----)"),
        (CA.cert_pem + CA.key_pem, "this holds a private key: give only the CA's certificate"),
        (CA.cert_pem.replace("\n", "\nAAAA", 1), "not a readable PEM certificate: "),
        (CA.cert_pem * (MAX_PEM_BYTES // len(CA.cert_pem) + 1), f"exceed {MAX_PEM_BYTES // 1024} KB"),
    ],
    ids=["path", "private key", "damaged", "too long"],
)
def test_what_is_not_a_ca_certificate_is_refused_in_the_dbas_words(value, words):
    assert words in refusal(value)["ssl_root_cert"][0]


def test_the_system_roots_are_the_bundle_python_finds_ssl_cert_file_first(monkeypatch, tmp_path):
    bundle = tmp_path / "roots.pem"
    bundle.write_text(CA.cert_pem)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert ssl.get_default_verify_paths().cafile == str(bundle)
    assert system_roots() == str(bundle)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    found = system_roots()
    assert found != str(tmp_path / "missing.pem") and (found == SYSTEM or os.path.isfile(found))


def test_libpq_gets_its_default_the_system_bundle_or_one_file_per_certificate(settings, tmp_path, monkeypatch):
    settings.TLS_CA_DIR = tmp_path / "ca"
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "roots.pem"))
    (tmp_path / "roots.pem").write_text(CA.cert_pem)
    assert root_cert_file("") is None
    assert root_cert_file(SYSTEM) == str(tmp_path / "roots.pem")
    path = root_cert_file(CA.cert_pem)
    assert path == str(tmp_path / "ca" / f"{hashlib.sha256(CA.cert_pem.encode()).hexdigest()}.crt")
    assert open(path).read() == CA.cert_pem and (os.stat(tmp_path / "ca").st_mode & 0o777) == 0o700
    written = os.stat(path)
    assert root_cert_file(CA.cert_pem) == path and os.stat(path).st_mtime_ns == written.st_mtime_ns
    assert root_cert_file(OTHER_CA.cert_pem) != path
    assert sorted(p.suffix for p in (tmp_path / "ca").iterdir()) == [".crt", ".crt"]  # no temporary file left
