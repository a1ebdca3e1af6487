"""The schema reading (collectors/schema/) through real collections of real servers: every database's tables and
indexes with their statistics, stored as deltas, each database on its own; caps, refusals and resets said."""

import time

import pytest
from django.db import connection
from django.utils import timezone

from collectors import connection as monitored
from collectors.errors import RefusedByPolicy
from collectors.public import database_error
from history import partitions
from history.models import SchemaIndex, SchemaTable, ServerState
from tests.world import collect, held_exclusive, name_switched_after_first_lookup, register, run, settled

pytestmark = pytest.mark.django_db(transaction=True)
OTHER_DB = "schema_other"
FULL_DB = "schema_full"  # CONNECT granted, but a connection limit of 0: libpq's words say why


@pytest.fixture
def every_reading(settings):
    """The schema read at every collection (its cadence is 10 minutes by default)."""
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}
    return settings


def _world(c):
    """Tables of the app database: orders (a primary key, a selective index, an unused one, a redundant one, a
    unique constraint, a partial and an expression index), a partitioned table, and a second database."""
    c.execute(
        "DROP TABLE IF EXISTS sr_orders, sr_events, sr_fresh CASCADE; "
        "CREATE TABLE sr_orders (id int PRIMARY KEY, customer int, status text, code text UNIQUE, note text); "
        "INSERT INTO sr_orders SELECT g, g % 500, (ARRAY['new','paid','sent'])[g % 3 + 1], 'c' || g, 'n' "
        "FROM generate_series(1, 5000) g; "
        "CREATE INDEX sr_orders_customer ON sr_orders (customer); "
        "CREATE INDEX sr_orders_customer_status ON sr_orders (customer, status); "
        "CREATE INDEX sr_orders_note ON sr_orders (note); "
        "CREATE INDEX sr_orders_open ON sr_orders (customer) WHERE status = 'new'; "
        "CREATE INDEX sr_orders_lower_code ON sr_orders (lower(code)); "
        "CREATE TABLE sr_events (at date, n int) PARTITION BY RANGE (at); "
        "CREATE TABLE sr_events_2026 PARTITION OF sr_events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01'); "
        "CREATE INDEX sr_events_n ON sr_events (n); "
        "ANALYZE sr_orders",
        dbname="app",
    )
    settled(c, "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'sr_orders'", True)
    c.execute(f"DROP DATABASE IF EXISTS {OTHER_DB}")
    c.execute(f"CREATE DATABASE {OTHER_DB}")
    c.execute("CREATE TABLE elsewhere (id int PRIMARY KEY)", dbname=OTHER_DB)


def _table(server, name, database="app"):
    return SchemaTable.objects.get(server_id=server.pk, database=database, name=name)


def _index(server, name, database="app"):
    return SchemaIndex.objects.get(server_id=server.pk, database=database, name=name)


def _deltas(server, database="app"):
    """Each stored reading of the database: {table name: {counter: delta}}, {index name: idx_scan delta}."""
    names = dict(SchemaTable.objects.filter(server_id=server.pk).values_list("id", "name"))
    index_names = dict(SchemaIndex.objects.filter(server_id=server.pk).values_list("id", "name"))
    with connection.cursor() as cur:
        cur.execute(
            "SELECT table_ids, seq_scan, n_tup_ins, n_tup_upd, n_tup_del, index_ids, index_scan "
            "FROM collectors_schema_delta WHERE server_id = %s AND database = %s ORDER BY taken_at",
            [server.pk, database],
        )
        found = []
        for ids, seq, ins, upd, dele, iids, iscan in cur.fetchall():
            tables = {
                names[i]: {"seq_scan": s, "n_tup_ins": a, "n_tup_upd": u, "n_tup_del": d}
                for i, s, a, u, d in zip(ids, seq, ins, upd, dele, strict=True)
            }
            found.append((tables, {index_names[i]: n for i, n in zip(iids, iscan, strict=True)}))
    return found


def _status(server):
    return ServerState.objects.get(server_id=server.pk).readings["schema"]


@pytest.mark.parametrize("major", [13, 15, 18])
def test_every_database_is_read_and_a_second_reading_stores_what_moved(pg_clusters, every_reading, major):
    c = pg_clusters[major]
    _world(c)
    server = register(c)
    collect(server)
    status = _status(server)
    assert status["ok"] and status["databases"]["app"]["ok"] and status["databases"][OTHER_DB]["ok"]
    assert "template0" not in status["databases"] and "template1" not in status["databases"]
    assert _table(server, "elsewhere", OTHER_DB).kind == "r"  # the other database, on its own connection
    orders = _table(server, "sr_orders")
    assert orders.n_live_tup == 5000 and orders.size_bytes >= 5000 * 20 and orders.last_analyze_at is not None
    assert _table(server, "sr_events_2026").partition
    pkey, code = _index(server, "sr_orders_pkey"), _index(server, "sr_orders_code_key")
    assert pkey.is_primary and pkey.constraint == "sr_orders_pkey" and pkey.key_columns == ["id"]
    assert code.is_unique and code.constraint == "sr_orders_code_key"
    pair = _index(server, "sr_orders_customer_status")
    assert pair.key_columns == ["customer", "status"] and pair.method == "btree" and not pair.constraint
    assert (
        pair.definition == "CREATE INDEX sr_orders_customer_status ON public.sr_orders USING btree (customer, status)"
    )
    partial, expression = _index(server, "sr_orders_open"), _index(server, "sr_orders_lower_code")
    assert partial.predicate_md5 and not partial.expressions_md5
    assert expression.expressions_md5 and expression.key_columns == [None] and expression.key_attnums == [0]
    assert all(
        i.is_valid and i.size_bytes > 0
        for i in SchemaIndex.objects.filter(server_id=server.pk, database="app")
        if i.name.startswith("sr_orders")
    )
    assert _deltas(server) == []  # the first reading of a database: its counters hold time from before

    run(c, "SELECT count(*) FROM sr_orders WHERE note = 'x'", 3)  # uses sr_orders_note (or scans)
    run(c, "SET enable_indexscan = off; SET enable_bitmapscan = off; SELECT count(*) FROM sr_orders", 4)
    run(c, "INSERT INTO sr_orders VALUES (6001, 1, 'new', 'c6001', 'n')")
    run(c, "UPDATE sr_orders SET note = 'm' WHERE id <= 10")
    run(c, "DELETE FROM sr_orders WHERE id = 6001")
    settled(c, "SELECT n_tup_del FROM pg_stat_user_tables WHERE relname = 'sr_orders'", 1)
    collect(server)
    ((tables, indexes),) = _deltas(server)
    assert tables["sr_orders"]["seq_scan"] >= 4
    assert (tables["sr_orders"]["n_tup_ins"], tables["sr_orders"]["n_tup_upd"], tables["sr_orders"]["n_tup_del"]) == (
        1,
        10,
        1,
    )
    assert "elsewhere" not in tables  # nothing moved there
    assert "sr_orders_customer_status" not in indexes  # never scanned
    stored = _table(server, "sr_orders")
    assert stored.n_tup_ins == 5001 and stored.n_tup_upd == 10


def test_a_database_the_role_may_not_connect_to_is_said_and_the_others_stored(pg_clusters, every_reading):
    c = pg_clusters[15]
    _world(c)
    c.execute(f"REVOKE CONNECT ON DATABASE {OTHER_DB} FROM PUBLIC")
    server = register(c)
    result = collect(server)
    databases = _status(server)["databases"]
    assert databases[OTHER_DB] == {
        "ok": False,
        "code": "privilege",
        "error": "the monitoring role may not connect to it (no CONNECT privilege)",
        "last_ok_at_us": None,
        "complete": False,
    }
    assert databases["app"]["ok"] and _table(server, "sr_orders")
    assert any(OTHER_DB in note and "CONNECT" in note for note in result.notes)
    assert not SchemaTable.objects.filter(server_id=server.pk, database=OTHER_DB).exists()


def test_a_database_whose_table_is_held_under_an_exclusive_lock_is_given_up_and_said(pg_clusters, every_reading):
    c = pg_clusters[15]
    _world(c)
    server = register(c)
    with held_exclusive(c, "elsewhere", dbname=OTHER_DB):  # a migration's lock: the file's size cannot be read
        started = time.monotonic()
        result = collect(server)
        took = time.monotonic() - started
    databases = _status(server)["databases"]
    assert databases[OTHER_DB]["ok"] is False and databases[OTHER_DB]["code"] == "timeout"
    assert "timed out" in databases[OTHER_DB]["error"] and databases["app"]["ok"]
    assert any(OTHER_DB in note for note in result.notes) and took < 10  # the lock timeout, not the holder's 30 s
    assert _table(server, "sr_orders") and not SchemaTable.objects.filter(server_id=server.pk, database=OTHER_DB)


def test_the_largest_tables_are_kept_under_the_cap_and_the_cap_is_said(pg_clusters, every_reading):
    c = pg_clusters[15]
    _world(c)
    every_reading.COLLECTOR = {**every_reading.COLLECTOR, "SCHEMA_MAX_TABLES": 1}
    server = register(c)
    result = collect(server)
    app = _status(server)["databases"]["app"]
    assert (app["tables"], app["complete"]) == (1, False) and app["tables_total"] >= 3
    (largest,) = c.execute(  # the shared cluster's app database may hold others' tables, larger ones too
        "SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid "
        "ORDER BY c.relpages DESC, s.relid LIMIT 1",
        dbname="app",
    )[0]
    assert list(SchemaTable.objects.filter(server_id=server.pk).values_list("name", flat=True)) == [largest]
    assert _status(server)["databases"][OTHER_DB]["code"] == "cap"
    assert any("cap" in note and "1 of" in note for note in result.notes)


def test_a_reset_a_new_table_and_a_dropped_one(pg_clusters, every_reading):
    c = pg_clusters[15]
    _world(c)
    server = register(c)
    collect(server)
    before = _index(server, "sr_orders_pkey")
    run(c, "SELECT pg_stat_reset()")
    run(c, "CREATE TABLE sr_fresh (id int); INSERT INTO sr_fresh SELECT generate_series(1, 7)")
    run(c, "DROP INDEX sr_orders_note")
    run(c, "SELECT count(*) FROM sr_orders WHERE id = 5", 2)
    settled(c, "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'sr_orders_pkey'", 2)
    collect(server)
    ((tables, indexes),) = _deltas(server)
    assert tables["sr_fresh"]["n_tup_ins"] == 7  # created in the interval: counted from zero
    assert indexes["sr_orders_pkey"] == 2  # counted from the reset, not against the counters before it
    after = _index(server, "sr_orders_pkey")
    assert after.stats_since > before.stats_since and after.scans_at_since == 0 and after.last_scan_at is not None
    assert _index(server, "sr_orders_note").gone_at is not None
    assert _index(server, "sr_orders_customer").gone_at is None


def test_a_partition_dropped_behind_the_workers_back_is_made_again(pg_clusters, every_reading):
    """The deltas' partition of today dropped while this process remembers it (a migration run back and forth
    does that): the snapshot's transaction rolls back, the partitions are looked at again, and it is stored."""
    c = pg_clusters[15]
    _world(c)
    server = register(c)
    collect(server)
    with connection.cursor() as cur:
        cur.execute(f'DROP TABLE IF EXISTS "{partitions.partition_name("collectors_schema_delta", timezone.now())}"')
    run(c, "INSERT INTO sr_orders VALUES (7001, 1, 'new', 'c7001', 'n')")
    settled(c, "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'sr_orders'", 5001)
    collect(server)
    ((tables, _),) = _deltas(server)
    assert tables["sr_orders"]["n_tup_ins"] == 1


def _databases(c) -> list[str]:
    """The databases a reading lists, the monitored one first, then by name (as the server sorts names)."""
    rows = c.execute(
        "SELECT datname FROM pg_database WHERE NOT datistemplate AND datallowconn ORDER BY datname <> 'app', datname",
    )
    return [name for (name,) in rows]


def test_a_server_of_more_databases_than_the_cap_is_asked_for_the_first_and_counts_the_rest(pg_clusters, every_reading):
    """The server's databases past SCHEMA_MAX_DATABASES are not listed one by one, in the status or its note, at
    each reading: a count and the first few names are kept."""
    c = pg_clusters[15]
    _world(c)
    every_reading.COLLECTOR = {**every_reading.COLLECTOR, "SCHEMA_MAX_DATABASES": 1}
    server = register(c)
    result = collect(server)
    status, listed = _status(server), _databases(c)
    assert list(status["databases"]) == ["app"] and status["databases"]["app"]["ok"]
    assert status["databases_total"] == len(listed) >= 3 and status["databases_cap"] == 1
    assert status["beyond_cap"] == listed[1:6]
    (note,) = [n for n in result.notes if "COLLECTOR_SCHEMA_MAX_DATABASES" in n]
    assert f"{len(listed) - 1} of the server's {len(listed)} databases not read" in note
    assert all(name in note for name in listed[1:6]) and all(name not in note for name in listed[6:])
    assert not SchemaTable.objects.filter(server_id=server.pk, database=OTHER_DB).exists()


def test_a_database_libpq_cannot_connect_to_keeps_libpqs_words_for_staff_only(pg_clusters, every_reading):
    c = pg_clusters[15]
    _world(c)
    c.execute(f"DROP DATABASE IF EXISTS {FULL_DB}")
    c.execute(f"CREATE DATABASE {FULL_DB} CONNECTION LIMIT 0")  # the monitoring role is no superuser: refused
    try:
        server = register(c)
        collect(server)
        full = _status(server)["databases"][FULL_DB]
    finally:
        c.execute(f"DROP DATABASE IF EXISTS {FULL_DB}")
    assert (full["ok"], full["code"]) == (False, "unreachable")
    assert "too many connections" in full["error"] and "127.0.0.1" in full["error"]  # libpq's, with the address
    said = database_error(full["code"], full["error"], detail=False)
    assert said == "The console could not connect to this database, or the connection was lost."
    assert database_error(full["code"], full["error"], detail=True) == full["error"]
    assert database_error("privilege", "no CONNECT privilege", detail=False) == "no CONNECT privilege"


def test_every_database_is_dialled_at_the_address_the_snapshot_dialled(pg_clusters, every_reading, monkeypatch):
    """The server's host name switched, after the snapshot's connection, to an address the policy refuses (the
    cloud metadata service's): the other databases' connections still go where the snapshot's went, without a
    lookup of their own."""
    c = pg_clusters[15]
    _world(c)
    server = register(c)
    monitored.close_all()  # the snapshot's connection is a new one: its host is looked up
    looked_up = name_switched_after_first_lookup(monkeypatch, server)
    collect(server)
    databases = _status(server)["databases"]
    assert databases[OTHER_DB]["ok"] and _table(server, "elsewhere", OTHER_DB)
    assert looked_up == [server.host]  # once, for the snapshot's connection
    with pytest.raises(RefusedByPolicy, match="link-local or cloud metadata"):  # a lookup now would be refused
        monitored.monitoring_target(server).dial_address()
