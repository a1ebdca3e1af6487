"""collectors/schema/catalog.py against real servers: the databases listed, a database's tables and indexes as each
major's statistics views give them, the caps, and the odd relations (invalid, partitioned, never analyzed)."""

import time

import psycopg
import pytest

from collectors.schema import catalog

OTHER_DB = "catalog_other"


def _conn(c, dbname="app"):
    return psycopg.connect(c.dsn(dbname), autocommit=True)


def _largest(c) -> str:
    """The app database's largest table by the planner's page count (the shared cluster holds others' tables)."""
    return c.execute(
        "SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid "
        "ORDER BY c.relpages DESC, s.relid LIMIT 1",
        dbname="app",
    )[0][0]


def _world(c):
    c.execute(
        "DROP TABLE IF EXISTS cat_big, cat_small, cat_dup, cat_parted CASCADE; "
        "CREATE TABLE cat_big (id int PRIMARY KEY, v int); "
        "INSERT INTO cat_big SELECT g, g FROM generate_series(1, 20000) g; "
        "CREATE INDEX cat_big_v ON cat_big (v) INCLUDE (id); "
        "CREATE TABLE cat_small (id int); "
        "CREATE TABLE cat_dup (k int); INSERT INTO cat_dup VALUES (1), (1); "
        "CREATE TABLE cat_parted (at date, n int) PARTITION BY RANGE (at); "
        "CREATE INDEX cat_parted_n ON cat_parted (n); "
        "ANALYZE cat_big",
        dbname="app",
    )
    for _ in range(100):  # on 13 and 14 the statistics collector hears of the ANALYZE a moment later
        if c.execute("SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'cat_big'", dbname="app")[0][0]:
            break
        time.sleep(0.05)
    # A unique index built concurrently over duplicates fails and stays, invalid.
    with pytest.raises(psycopg.errors.UniqueViolation), _conn(c) as conn:
        conn.execute("CREATE UNIQUE INDEX CONCURRENTLY cat_dup_k ON cat_dup (k)")


@pytest.mark.parametrize("major", [13, 16])
def test_a_databases_tables_and_indexes_as_its_majors_views_give_them(pg_clusters, major):
    c = pg_clusters[major]
    _world(c)
    c.execute("SELECT count(*) FROM cat_big WHERE id = 3", dbname="app")
    c.execute("SELECT pg_stat_force_next_flush()" if major >= 15 else "SELECT 1", dbname="app")
    sql = catalog.SQL.at(major * 10000)
    with _conn(c) as conn:
        listed, replication = catalog.read_databases(conn, sql, limit=100)
        databases = listed.listed
        assert databases[0].name == "app" and databases[0].current and listed.total == len(databases)
        assert replication == catalog.ServerRole(in_recovery=False, standbys=0)
        assert {"postgres", "app"} <= {d.name for d in databases} and "template1" not in {d.name for d in databases}
        read = catalog.read_database(conn, sql, databases[0], max_tables=1000, max_indexes=1000)
    tables = {t.name: t for t in read.tables}
    order = [t.name for t in read.tables]
    assert order.index("cat_big") < order.index("cat_small")  # the largest first
    assert tables["cat_big"].size_bytes >= 8192 * 50 and tables["cat_big"].last_analyze_at is not None
    assert tables["cat_small"].last_analyze_at is None and tables["cat_small"].size_bytes == 0
    indexes = {i.name: i for i in read.indexes}
    covering = indexes["cat_big_v"]
    assert (covering.key_columns, covering.include_count, covering.is_valid) == (["v"], 1, True)
    assert not indexes["cat_dup_k"].is_valid and indexes["cat_dup_k"].is_unique
    assert indexes["cat_big_pkey"].constraint == "cat_big_pkey" and indexes["cat_big_pkey"].is_primary
    if major >= 16:  # pg_stat_user_indexes.last_idx_scan
        assert indexes["cat_big_pkey"].last_scan_at is not None
    else:
        assert indexes["cat_big_pkey"].last_scan_at is None
    assert not read.capped


def test_the_caps_keep_the_largest_tables_and_say_how_many_there_were(pg_clusters):
    c = pg_clusters[15]
    _world(c)
    sql = catalog.SQL.at(150000)
    with _conn(c) as conn:
        app = catalog.read_databases(conn, sql, limit=1)[0].listed[0]
        read = catalog.read_database(conn, sql, app, max_tables=1, max_indexes=1000)
        indexes_capped = catalog.read_database(conn, sql, app, max_tables=1000, max_indexes=1)
    assert [t.name for t in read.tables] == [_largest(c)] and read.tables_total >= 4 and read.capped
    assert all(i.table_relid == read.tables[0].relid for i in read.indexes)  # the indexes of the tables kept
    assert len(indexes_capped.indexes) == 1 and indexes_capped.indexes_total >= 3 and indexes_capped.capped


def test_an_index_known_by_oid_and_name_is_not_described_again_and_a_renamed_one_is(pg_clusters):
    c = pg_clusters[15]
    _world(c)
    sql = catalog.SQL.at(150000)
    with _conn(c) as conn:
        app = catalog.read_databases(conn, sql, limit=1)[0].listed[0]
        first = catalog.read_database(conn, sql, app, max_tables=1000, max_indexes=1000)
        ids = {i.name: i.relid for i in first.indexes}
        known = {ids["cat_big_v"]: "cat_big_v", ids["cat_big_pkey"]: "cat_big_pkey"}
        c.execute("ALTER INDEX cat_big_pkey RENAME TO cat_big_pk", dbname="app")
        read = catalog.read_database(conn, sql, app, max_tables=1000, max_indexes=1000, known=known)
        again = {i.name: i for i in read.indexes}
    c.execute("ALTER INDEX cat_big_pk RENAME TO cat_big_pkey", dbname="app")
    kept = again["cat_big_v"]
    assert not kept.described and kept.definition is None and kept.key_columns is None and kept.predicate_md5 is None
    assert kept.counters is not None and kept.size_bytes > 0 and kept.is_valid  # its statistics, read as always
    renamed = again["cat_big_pk"]
    assert renamed.described and renamed.definition.startswith("CREATE UNIQUE INDEX cat_big_pk ON")
    assert again["cat_dup_k"].described  # not known: described


def test_a_database_the_role_may_not_connect_to_is_listed_as_such(pg_clusters):
    c = pg_clusters[15]
    c.execute(f"DROP DATABASE IF EXISTS {OTHER_DB}")
    c.execute(f"CREATE DATABASE {OTHER_DB}")
    c.execute(f"REVOKE CONNECT ON DATABASE {OTHER_DB} FROM PUBLIC")
    with psycopg.connect(c.dsn("app", "monitor", "monitor-pw"), autocommit=True) as conn:
        listed, _ = catalog.read_databases(conn, catalog.SQL.at(150000), limit=100)
    c.execute(f"DROP DATABASE {OTHER_DB}")
    found = {d.name: d.may_connect for d in listed.listed}
    assert found[OTHER_DB] is False and found["app"] is True


def test_the_list_of_databases_is_as_long_as_asked_and_counts_them_all(pg_clusters):
    """A server of many databases: the snapshot's first, then the first others by name, no more than asked for (a
    LIMIT on the server), and how many there are in all."""
    c = pg_clusters[15]
    names = [f"catalog_many_{n}" for n in range(3)]
    for name in names:
        c.execute(f"DROP DATABASE IF EXISTS {name}")
        c.execute(f"CREATE DATABASE {name}")
    try:
        with psycopg.connect(c.dsn("app", "monitor", "monitor-pw"), autocommit=True) as conn:
            every, _ = catalog.read_databases(conn, catalog.SQL.at(150000), limit=1000)
            two, replication = catalog.read_databases(conn, catalog.SQL.at(150000), limit=2)
    finally:
        for name in names:
            c.execute(f"DROP DATABASE IF EXISTS {name}")
    ordered = sorted(d.name for d in every.listed if d.name != "app")
    assert every.total == len(every.listed) >= 5 and set(names) <= set(ordered)
    assert [d.name for d in two.listed] == ["app", ordered[0]] and two.total == every.total
    assert replication == catalog.ServerRole(in_recovery=False, standbys=0)
