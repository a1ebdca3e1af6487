"""Every way a collection can fail gives a clear status on the server, stores nothing partial,
and leaves the other servers' collections alone."""

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from collectors.services import server_collect
from inventory.models import Server
from tests import slots
from tests.world import APP_DB, MONITOR_PASSWORD, collect, history_counts, register, run

pytestmark = pytest.mark.django_db(transaction=True)


def _fails(server: Server, code: str, *words: str) -> Server:
    before = history_counts(server)
    result = server_collect(server_id=server.pk)
    assert not result.ok and result.error_code == code, result.summary()
    server.refresh_from_db()
    assert server.last_error_class == code
    assert server.consecutive_failures >= 1
    for word in words:
        assert word in server.last_error_message, server.last_error_message
    assert history_counts(server) == before, "a failed collection stored something"
    return server


def test_unreachable_host(pg_clusters):
    server = register(pg_clusters[16], name="nowhere")
    Server.objects.filter(pk=server.pk).update(port=1)
    _fails(server, "unreachable", "cannot connect", "127.0.0.1:1")


def test_wrong_password(pg_clusters):
    server = register(pg_clusters[16], name="badpw", password="not-the-password")
    _fails(server, "auth_failed", "authentication failed")


def test_extension_not_created(pg_clusters):
    c = pg_clusters[17]
    c.execute("DROP DATABASE IF EXISTS noext")
    c.execute("CREATE DATABASE noext")
    server = register(c, name="noext", dbname="noext")
    _fails(server, "extension_missing", "CREATE EXTENSION pg_stat_statements", "noext")


def test_not_in_shared_preload_libraries(pg_clusters):
    """The extension exists but the library is not preloaded (a cluster started without it)."""
    from devenv.fleet import ClusterSpec, start_many, stop_many
    from devenv.ports import port_for_extra_test
    from tests.conftest import MONITOR_HBA, setup_monitored

    spec = ClusterSpec(
        name="test-nopreload",
        major=16,
        port=slots.port(port_for_extra_test(17)),
        base=slots.cluster_dir(),
        settings={},
        preload=[],
        hba=MONITOR_HBA,
        fresh=True,
        setup=setup_monitored(["pg_stat_statements"]),
    )
    c = start_many([spec])[spec.name]
    try:
        server = register(c, name="nopreload")
        _fails(server, "not_preloaded", "shared_preload_libraries")
    finally:
        stop_many([c])


def test_insufficient_privilege(pg_clusters):
    c = pg_clusters[18]
    c.execute("DROP DATABASE IF EXISTS locked")
    c.execute("CREATE DATABASE locked")
    c.execute("CREATE EXTENSION pg_stat_statements", dbname="locked")
    c.execute("REVOKE EXECUTE ON FUNCTION pg_stat_statements(boolean) FROM PUBLIC", dbname="locked")
    c.execute("DROP ROLE IF EXISTS nobody_special")
    c.execute("CREATE ROLE nobody_special LOGIN PASSWORD 'pw'")
    server = register(c, name="locked", dbname="locked", user="nobody_special", password="pw")
    _fails(server, "insufficient_privilege", "permission denied")


def test_unsupported_version(pg12_cluster):
    server = register(pg12_cluster, name="old")
    _fails(server, "unsupported_version", "PostgreSQL 12 is not supported", "13 or newer")


def test_malformed_connection_settings_at_collection(pg_clusters):
    server = register(pg_clusters[16], name="badssl")
    Server.objects.filter(pk=server.pk).update(sslmode="bogus")
    _fails(server, "malformed_dsn", "sslmode")


def test_malformed_dsn_is_refused_when_adding():
    for dsn, words in [
        ("host=db1 port=notaport", "invalid port"),
        ("postgresql://mon@db1:5432/x?sslmode=sometimes", "sslmode"),
        ("this is not a dsn", "malformed DSN"),
        ("dbname=x", "host is required"),
    ]:
        with pytest.raises(CommandError, match=words):
            call_command("servers", "add", "bad", "--dsn", dsn)
    assert not Server.objects.exists()


def test_failure_then_recovery_clears_the_status(pg_clusters):
    c = pg_clusters[13]
    server = register(c, name="flaky")
    Server.objects.filter(pk=server.pk).update(port=1)
    _fails(server, "unreachable")
    Server.objects.filter(pk=server.pk).update(port=c.port)
    collect(server)
    server.refresh_from_db()
    assert server.consecutive_failures == 0 and server.last_error_class == ""


def test_hostile_query_text_is_stored_redacted_and_verbatim_otherwise(pg_clusters):
    c = pg_clusters[15]  # before 16, utility statements keep their literals
    server = register(c, name="hostile")
    collect(server)
    c.execute("DROP ROLE IF EXISTS victim")
    run(c, "CREATE ROLE victim LOGIN PASSWORD 's3cr3t-value'")
    run(c, "SELECT '<script>alert(1)</script>' AS x, 'it''s' AS y")
    collect(server)
    with psycopg.connect(c.dsn(APP_DB)) as conn:
        raw = conn.execute("SELECT query FROM pg_stat_statements WHERE query LIKE 'CREATE ROLE victim%'").fetchone()[0]
    assert "s3cr3t-value" in raw  # the server kept the secret...
    texts = list(server.statements.values_list("query", flat=True))
    assert not any("s3cr3t-value" in (t or "") for t in texts)  # ...we did not
    assert any(t and "PASSWORD '<redacted>'" in t for t in texts)
    assert any(t and "SELECT $1 AS x" in t for t in texts)
    assert not any(MONITOR_PASSWORD in (t or "") for t in texts)
