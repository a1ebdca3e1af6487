"""TLS and SCRAM to monitored servers, against real clusters that offer TLS with devenv's certificate
(devenv/tls.py): what a new server requires, verification with a CA given per server or the system's roots,
and what the check and the collector say when the server cannot give what is required."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from django.core.exceptions import ValidationError

from collectors.connection_check import CheckReport, server_check
from collectors.services import server_collect
from devenv import tls as devenv_tls
from devenv.cluster import Cluster
from inventory.connection import parse_dsn
from inventory.endpoint import Endpoint
from inventory.models import Server
from inventory.services import server_create, server_update
from tests.conftest import APP_DB, MD5_USER, MONITOR_PASSWORD, MONITOR_USER
from tests.world import register

OTHER_CA = devenv_tls.new_ca("another CA")


def check(cluster: Cluster, *, password: str | None = MONITOR_PASSWORD, **kwargs) -> CheckReport:
    fields = {"host": "127.0.0.1", "port": cluster.port, "database": APP_DB, "user": MONITOR_USER, "sslmode": "require"}
    return server_check(endpoint=Endpoint(**{**fields, **kwargs}), password=password)


def tls_finding(report: CheckReport) -> str:
    return next(f.text for f in report.findings if f.topic == "TLS")


@contextlib.contextmanager
def tls_off(cluster: Cluster) -> Iterator[None]:
    cluster.set_config({"ssl": False})
    try:
        yield
    finally:
        cluster.set_config({"ssl": True})
        cluster.execute("ALTER SYSTEM RESET ssl")


def collector_uses_tls(cluster: Cluster) -> list[bool]:
    """Whether each of the monitor role's sessions on the cluster (the collector keeps its own) is encrypted."""
    rows = cluster.execute(
        "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.usename = %s",
        dbname=APP_DB,
        params=[MONITOR_USER],
    )
    return [r[0] for r in rows]


# ---- what a new server requires -------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_new_server_requires_tls_and_scram_and_its_collector_session_is_encrypted(pg_clusters):
    cluster = pg_clusters[16]
    server = register(cluster)  # a DSN naming no sslmode
    assert (server.sslmode, server.require_scram, server.tls_warnings) == ("require", True, [])
    result = server_collect(server_id=server.pk)
    assert result.ok, result.summary()
    assert collector_uses_tls(cluster) and all(collector_uses_tls(cluster))


@pytest.mark.django_db
def test_a_server_that_offers_no_tls_fails_require_with_what_to_do(pg_clusters):
    cluster = pg_clusters[17]
    server = register(cluster)
    with tls_off(cluster):
        report = check(cluster)
        result = server_collect(server_id=server.pk)
    assert report.failure == "tls" and "does not support SSL" in report.findings[0].detail
    assert "does not offer TLS and sslmode=require requires it" in report.findings[0].text
    assert not result.ok
    server.refresh_from_db()
    assert server.last_error_class == "tls" and "server does not support SSL" in server.last_error_message


def test_prefer_goes_in_clear_to_a_server_without_tls_and_the_check_says_so(pg_clusters):
    cluster = pg_clusters[17]
    with tls_off(cluster):
        report = check(cluster, sslmode="prefer")
    assert report.connected
    assert tls_finding(report).startswith("Not encrypted (sslmode=prefer)")
    encrypted = check(cluster, sslmode="prefer")
    assert "Encrypted (TLSv1.3), but the server's certificate is not verified" in tls_finding(encrypted)


# ---- verification ---------------------------------------------------------------------------------------


def test_verify_full_with_the_ca_given_for_the_server(pg_clusters):
    report = check(pg_clusters[18], sslmode="verify-full", ssl_root_cert=devenv_tls.ca_pem())
    assert report.connected, report.findings
    assert tls_finding(report) == (
        "Encrypted (TLSv1.3); the server's certificate is verified against the CA certificate given for host "
        "'127.0.0.1'."
    )


def test_verify_full_against_another_ca_fails(pg_clusters):
    report = check(pg_clusters[18], sslmode="verify-full", ssl_root_cert=OTHER_CA.cert_pem)
    assert not report.connected and report.failure == "tls"
    assert report.findings[0].text.startswith("The server's certificate does not verify against the CA given")
    assert "certificate verify failed" in report.findings[0].detail


def test_verify_full_without_a_ca_says_where_to_give_one(pg_clusters, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.postgresql/root.crt there
    report = check(pg_clusters[18], sslmode="verify-full")
    assert report.failure == "tls"
    assert "no CA is given: paste the CA certificate that signed it (PEM)" in report.findings[0].text


def test_the_systems_roots_as_python_finds_them(pg_clusters, monkeypatch, tmp_path):
    """system: the bundle Python's OpenSSL finds (SSL_CERT_FILE first), not the folder psycopg's wheel asks for."""
    monkeypatch.setenv("SSL_CERT_FILE", str(devenv_tls.devenv_tls() / "ca.crt"))
    trusted = check(pg_clusters[18], sslmode="verify-full", ssl_root_cert="system")
    assert trusted.connected and "verified against the system's trusted roots" in tls_finding(trusted)
    other = tmp_path / "other.pem"
    other.write_text(OTHER_CA.cert_pem)
    monkeypatch.setenv("SSL_CERT_FILE", str(other))
    refused = check(pg_clusters[18], sslmode="verify-full", ssl_root_cert="system")
    assert refused.failure == "tls" and "certificate verify failed" in refused.findings[0].detail


@pytest.mark.django_db
def test_a_verified_server_is_collected_and_its_ca_file_is_written_once(pg_clusters, settings, tmp_path):
    settings.TLS_CA_DIR = tmp_path / "ca"
    server = register(pg_clusters[16])
    server = server_update(
        server=server, data={"sslmode": "verify-full", "ssl_root_cert": devenv_tls.ca_pem()}, password=MONITOR_PASSWORD
    )
    assert server_collect(server_id=server.pk).ok
    assert server_collect(server_id=server.pk).ok
    files = list((tmp_path / "ca").iterdir())
    assert len(files) == 1 and files[0].read_text() == server.ssl_root_cert
    assert oct(files[0].parent.stat().st_mode & 0o777) == "0o700"


# ---- SCRAM ----------------------------------------------------------------------------------------------


@pytest.fixture
def md5_role(pg_clusters) -> str:
    cluster = pg_clusters[17]
    cluster.execute(f"DROP ROLE IF EXISTS {MD5_USER}")
    cluster.execute(f"SET password_encryption = 'md5'; CREATE ROLE {MD5_USER} LOGIN PASSWORD 'md5-pw-1'")
    return "md5-pw-1"


def test_scram_required_refuses_to_send_the_password_as_an_md5_hash(pg_clusters, md5_role):
    report = check(pg_clusters[17], user=MD5_USER, password=md5_role, require_scram=True)
    assert not report.connected and report.failure == "scram"
    finding = report.findings[0]
    assert finding.text.startswith("The server asked for the password as an MD5 hash, and this server requires SCRAM")
    assert "SET password_encryption = 'scram-sha-256';" in finding.fix and f"ALTER ROLE {MD5_USER}" in finding.fix
    assert check(pg_clusters[17], user=MD5_USER, password=md5_role, require_scram=False).connected


def test_scram_required_refuses_a_server_that_lets_anyone_in(pg_clusters):
    """An impostor's way: accept the role without asking for anything (trust): the password is never sent."""
    report = check(pg_clusters[17], user="postgres", password="a-password", require_scram=True)
    assert report.failure == "scram" and "let the role in without a password" in report.findings[0].text


@pytest.mark.django_db
def test_the_collector_reports_scram_required_as_its_own_class(pg_clusters, md5_role):
    cluster = pg_clusters[17]
    server = server_create(name="md5-server", connection=parse_dsn(cluster.dsn(APP_DB, MD5_USER, md5_role)))
    assert not server_collect(server_id=server.pk).ok
    server.refresh_from_db()
    assert server.last_error_class == "scram_required"
    assert "Require SCRAM is on for this server, so it was not sent" in server.last_error_message


# ---- what is stored, and what a change does to the stored password --------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "sslmode, root, field, words",
    [
        ("require", "system", "ssl_root_cert", "with sslmode verify-full only"),
        ("verify-ca", "system", "ssl_root_cert", "with sslmode verify-full only"),
        ("require", devenv_tls.ca_pem(), "sslmode", "choose sslmode verify-full (or verify-ca), not require"),
        ("verify-full", "/etc/ssl/certs/ca.pem", "ssl_root_cert", "a path on the console's machine is not accepted"),
        (
            "verify-full",
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----",
            "ssl_root_cert",
            "not a readable PEM certificate",
        ),
        ("verify-full", devenv_tls.ca_pem() + OTHER_CA.key_pem, "ssl_root_cert", "holds a private key"),
    ],
)
def test_a_ca_certificate_that_cannot_serve_is_refused(sslmode, root, field, words):
    with pytest.raises(ValidationError) as refused:
        server_create(name="s", connection=parse_dsn(f"host=db1.example sslmode={sslmode}"), ssl_root_cert=root)
    assert words in " ".join(refused.value.message_dict[field])
    assert not Server.objects.filter(name="s").exists()


@pytest.mark.django_db
def test_the_same_certificate_pasted_with_crlf_is_no_change_and_another_clears_the_password():
    pem = devenv_tls.ca_pem()
    server = server_create(
        name="s", connection=parse_dsn("host=db1.example sslmode=verify-full password=pw-1"), ssl_root_cert=pem
    )
    server = server_update(server=server, data={"ssl_root_cert": "\n" + pem.replace("\n", "\r\n") + "  "})
    assert server.password_encrypted and server.ssl_root_cert == pem.strip()
    server = server_update(server=server, data={"ssl_root_cert": OTHER_CA.cert_pem})
    assert not server.password_encrypted


@pytest.mark.django_db
@pytest.mark.parametrize("change", [{"require_scram": False}, {"sslmode": "prefer"}, {"ssl_root_cert": "system"}])
def test_a_weaker_or_other_tls_or_scram_setting_clears_the_stored_password(change):
    server = server_create(name="s", connection=parse_dsn("host=db1.example sslmode=verify-full password=pw-1"))
    server = server_update(server=server, data=change)
    assert not server.password_encrypted
