"""Columns follow the installed extension version, not the server major; the monitoring session
is strict and recognisable; long texts are cut."""

import pytest
from django.conf import settings

from collectors import connection as monitored
from tests.world import APP_DB, collect, register, run, server_entry, snapshots

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    "major, version, has_info",
    [(14, "1.8", False), (17, "1.10", True), (13, "1.7", False)],
)
def test_older_extension_version_on_a_newer_server(pg_clusters, major, version, has_info):
    """After pg_upgrade without ALTER EXTENSION UPDATE, the old columns remain (e.g. blk_read_time,
    total_time on 1.7): they are discovered from the catalog and mapped."""
    c = pg_clusters[major]
    db = f"ext_{version.replace('.', '_')}"
    c.execute(f"DROP DATABASE IF EXISTS {db}")
    c.execute(f"CREATE DATABASE {db}")
    c.execute(f"CREATE EXTENSION pg_stat_statements VERSION '{version}'", dbname=db)
    c.execute(f"GRANT CONNECT ON DATABASE {db} TO monitor")
    run(c, "DROP TABLE IF EXISTS old_ext_items; CREATE TABLE old_ext_items (id int)", dbname=db)
    server = register(c, dbname=db)
    collect(server)
    run(c, "INSERT INTO old_ext_items SELECT generate_series(1, 4)", 5, dbname=db)
    result = collect(server)
    server.refresh_from_db()
    assert server.extension_version == version
    assert (result.dealloc_delta is not None) == has_info
    truth = server_entry(c, "INSERT INTO old_ext_items%", dbname=db)
    d = snapshots(server)[-1].deltas_of(truth["queryid"])
    assert (d["calls"], d["rows"]) == (5, 20)
    exec_ms = truth.get("total_exec_time", truth.get("total_time"))
    assert d["total_exec_us"] == round(exec_ms * 1000)


def test_monitoring_session_settings(pg_clusters):
    c = pg_clusters[18]
    server = register(c)
    conn = monitored.connect(monitored.monitoring_target(server))
    try:
        show = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]
            for name in (
                "statement_timeout",
                "lock_timeout",
                "application_name",
                "default_transaction_read_only",
                "work_mem",
            )
        }
    finally:
        conn.close()
    cfg = settings.COLLECTOR
    assert show["statement_timeout"] == f"{cfg['STATEMENT_TIMEOUT_MS'] // 1000}s"
    assert show["lock_timeout"] == f"{cfg['LOCK_TIMEOUT_MS'] // 1000}s"
    assert show["application_name"] == "pgconsole-collector"
    assert show["default_transaction_read_only"] == "on"
    assert show["work_mem"] == "64MB"  # the previous state is hashed in memory, never spilled


def test_kept_connection_is_reused_and_survives_a_restart(pg_clusters):
    c = pg_clusters[14]

    def collector_pids() -> set[int]:
        return {
            r[0]
            for r in c.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", params=["pgconsole-collector"]
            )
        }

    server = register(c)
    others = collector_pids()  # other tests' servers on this cluster keep theirs too
    collect(server)
    mine = collector_pids() - others
    assert len(mine) == 1  # kept open between snapshots
    collect(server)
    assert collector_pids() - others == mine
    c.restart()
    assert collect(server).kind == "delta"  # the dead kept connection was replaced transparently


def test_long_query_texts_are_cut(pg_clusters, settings):
    settings.COLLECTOR = {**settings.COLLECTOR, "QUERY_TEXT_MAX_BYTES": 100}
    c = pg_clusters[16]
    # The cluster may be near pg_stat_statements.max with what earlier tests ran (storms of distinct texts on 16):
    # the new entry could then be evicted before it is read, which is another test's subject, not this one's.
    run(c, "SELECT pg_stat_statements_reset()")
    server = register(c)
    collect(server)
    long_alias = "é" * 200  # multi-byte: the cut must not split a character
    run(c, f'SELECT 1 AS "{long_alias}"')
    result = collect(server)
    found = server.statements.filter(query__contains="ééé")
    assert found.exists(), (
        result.summary(),
        [(s.query[:40], s.text_status) for s in server.statements.exclude(text_status="stored")][:20],
        server.statements.count(),
        [
            r
            for r in c.execute(
                "SELECT count(*), (SELECT dealloc FROM pg_stat_statements_info) FROM pg_stat_statements", dbname=APP_DB
            )
        ],
        [
            r
            for r in c.execute(
                "SELECT calls, left(query, 40) FROM pg_stat_statements WHERE query LIKE '%ééé%'", dbname=APP_DB
            )
        ],
    )
    stored = found.get()
    assert stored.query_truncated
    assert len(stored.query.encode()) <= 100
    assert stored.query.startswith('SELECT $1 AS "é')


def test_huge_texts_are_cut_on_the_server_and_a_secret_at_the_cut_is_still_redacted(pg_clusters, settings, monkeypatch):
    """1 MB query texts: only their first QUERY_TEXT_MAX_BYTES + the redaction margin characters leave the
    monitored server (what texts.read_texts returns), and the stored text is cut and marked so. A URI password
    that crosses the stored size's edge is redacted whole, not stored half."""
    from collectors.texts import texts

    settings.COLLECTOR = {**settings.COLLECTOR, "QUERY_TEXT_MAX_BYTES": 100}
    c = pg_clusters[16]
    run(c, "DROP TABLE IF EXISTS huge_texts_items; CREATE TABLE huge_texts_items (id int)")
    server = register(c)
    collect(server)
    longest: list[int] = []
    read_texts = texts.read_texts

    def measured(*args, **kwargs):
        got = read_texts(*args, **kwargs)
        longest.extend(len(t.text or "") for t in got.by_key.values())
        return got

    monkeypatch.setattr(texts, "read_texts", measured)
    huge = "x" * 1_000_000
    secret = (
        f"/* {'y' * 76} postgresql://app:hunter2-at-the-edge@db.example/app */ SELECT max(id) FROM huge_texts_items"
    )
    run(c, f"/* {huge} */ SELECT count(*) FROM huge_texts_items; {secret}")
    collect(server)
    assert longest and max(longest) == texts.server_cut(100) < 10_000  # not a megabyte
    stored = server.statements.get(query__contains="xxxx")
    assert stored.query_truncated and len(stored.query.encode()) <= 100
    edge = server.statements.get(query__contains="yyyy")
    # The stored size (100 bytes) ends inside the password ("/* ", 76 y, " postgresql://app:hun" is 100).
    assert "app:hun" not in edge.query and edge.query_truncated and len(edge.query.encode()) <= 100
    assert edge.query.endswith("postgresql://app:<re")


def test_state_cached_by_another_snapshot_is_not_trusted(pg_clusters):
    """A worker's cached state is used only if it is the stored one: here the cache holds the state
    of an older snapshot (as if another worker had collected since), and the deltas stay exact."""
    from collectors.services import state_cache

    c = pg_clusters[15]
    run(c, "DROP TABLE IF EXISTS cache_items; CREATE TABLE cache_items (id int)")
    server = register(c)
    run(c, "SELECT count(*) FROM cache_items", 2)
    collect(server)
    stale_key = state_cache._items[server.pk][:2]  # (taken_at, entries)
    run(c, "SELECT count(*) FROM cache_items", 3)
    collect(server)  # "another worker": the stored state moves on
    state_cache.put(server.pk, *stale_key)  # this process still remembers the older one
    run(c, "SELECT count(*) FROM cache_items", 4)
    collect(server)
    queryid = server_entry(c, "SELECT count(*) FROM cache_items%")["queryid"]
    assert [s.deltas_of(queryid)["calls"] for s in snapshots(server)[1:]] == [3, 4]
