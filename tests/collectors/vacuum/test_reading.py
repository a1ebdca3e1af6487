"""The vacuum reading (collectors/vacuum/) through real collections of real servers, PostgreSQL 13 to 18: each
database's freeze ages as the server has them, moving by exactly the transaction IDs the test consumes, read
without assigning one, and a database's name stored as its owner wrote it."""

from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from collectors.vacuum.reading import SQL
from readtier import database_ages
from tests.world import APP_DB, MONITOR_PASSWORD, MONITOR_USER, collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)
MAJORS = (13, 14, 15, 16, 17, 18)
CONSUMED = 250  # transaction IDs the test assigns between two readings


@pytest.fixture
def every_reading(settings):
    """The vacuum reading at every collection (its cadence is 5 minutes by default)."""
    settings.COLLECTOR = {**settings.COLLECTOR, "VACUUM_INTERVAL_S": 0}
    return settings


def _stored(server) -> dict[str, list[tuple]]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT database, xid_age, mxid_age, allows_connections, freeze_max_age, multixact_freeze_max_age "
            "FROM collectors_vacuum_database WHERE server_id = %s ORDER BY taken_at",
            [server.pk],
        )
        out: dict[str, list[tuple]] = {}
        for database, *rest in cur.fetchall():
            out.setdefault(database, []).append(tuple(rest))
        return out


def _truth(c) -> tuple[dict[str, bool], int, int]:
    with psycopg.connect(c.dsn(APP_DB), autocommit=True) as conn:
        databases = dict(conn.execute("SELECT datname, datallowconn FROM pg_database").fetchall())
        freeze = int(conn.execute("SHOW autovacuum_freeze_max_age").fetchone()[0])
        multixact = int(conn.execute("SHOW autovacuum_multixact_freeze_max_age").fetchone()[0])
    return databases, freeze, multixact


@pytest.mark.parametrize("major", MAJORS)
def test_each_databases_ages_move_by_the_transaction_ids_consumed(pg_clusters, every_reading, major):
    c = pg_clusters[major]
    server = register(c)
    collect(server)
    run(c, "SELECT pg_catalog.txid_current()", CONSUMED)  # each in a transaction of its own: one XID each
    collect(server)
    stored = _stored(server)
    databases, freeze, multixact = _truth(c)
    assert set(stored) == set(databases)
    for database, rows in stored.items():
        assert len(rows) == 2, database
        assert {(r[2], r[3], r[4]) for r in rows} == {(databases[database], freeze, multixact)}
    # template0 is never vacuumed but against wraparound: its age grew by every transaction ID assigned meanwhile,
    # the test's and those of other tests on the same cluster
    (before, *_), (after, *_) = stored["template0"]
    assert after - before >= CONSUMED, (before, after)

    now = timezone.now()
    ages = {a.database: a for a in database_ages(server_id=server.pk, start=now - timedelta(hours=1), end=now)}
    template0 = ages["template0"]
    assert [p.xid_age for p in template0.points] == [before, after]
    assert template0.allows_connections is False and template0.freeze_max_age == freeze
    assert template0.xids_per_hour() > 0
    assert template0.share_of_freeze_max_age == after / freeze


@pytest.mark.parametrize("major", (13, 18))
def test_reading_the_ages_assigns_no_transaction_id(pg_clusters, major):
    """The reading's SQL as the monitoring role, in a read-only transaction as the collection runs it: no XID."""
    c = pg_clusters[major]
    with psycopg.connect(c.dsn(APP_DB, MONITOR_USER, MONITOR_PASSWORD)) as conn:
        conn.execute("SET TRANSACTION READ ONLY")
        rows = conn.execute(SQL.at(conn.info.server_version)).fetchall()
        assert rows and conn.execute("SELECT pg_catalog.pg_current_xact_id_if_assigned()").fetchone() == (None,)


def test_a_database_named_by_an_attacker_is_stored_as_written(pg_clusters, every_reading):
    c = pg_clusters[15]
    hostile = "vac\n*/ 'x'; DROP TABLE t; --"
    c.execute(f'DROP DATABASE IF EXISTS "{hostile}"')
    c.execute(f'CREATE DATABASE "{hostile}"')
    try:
        server = register(c)
        collect(server)
        assert hostile in _stored(server)
    finally:
        c.execute(f'DROP DATABASE IF EXISTS "{hostile}"')
