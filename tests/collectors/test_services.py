"""The collector (collectors/services.py, server_collect) against ground truth on real servers, PostgreSQL 13 to
18: exactly N executions between two snapshots are stored as exactly N calls and the exact rows, across resets,
restarts and eviction."""

import psycopg
import pytest

from tests.world import collect, register, run, server_entry, snapshots

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
MAJORS = (13, 14, 15, 16, 17, 18)


def _reset(cluster, queryid=None):
    if queryid is None:
        run(cluster, "SELECT pg_stat_statements_reset()")
    else:
        run(cluster, "SELECT pg_stat_statements_reset(0, 0, %s)", params=(queryid,))


@pytest.mark.parametrize("major", MAJORS)
def test_exact_calls_and_rows_through_resets_and_restart(pg_clusters, major):
    c = pg_clusters[major]
    table = f"gt_items_{major}"
    run(c, f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int)")
    select = f"SELECT count(*) FROM {table} WHERE id > %s"
    insert = f"INSERT INTO {table} SELECT generate_series(1, 10)"
    server = register(c)

    assert collect(server).kind == "baseline"
    assert snapshots(server)[0].block is None  # a baseline stores no deltas

    # 1. New keys inside the interval: delta = everything they did.
    run(c, insert, 3)  # 3 calls, 30 rows
    run(c, select, 7, params=(0,))  # 7 calls, 1 row each
    first = collect(server)
    assert first.kind == "delta" and first.new_entries >= 2
    q_insert = server_entry(c, f"INSERT INTO {table}%")["queryid"]
    q_select = server_entry(c, f"SELECT count(*) FROM {table}%")["queryid"]
    snap = snapshots(server)[-1]
    assert snap.deltas_of(q_insert)["calls"] == 3
    assert snap.deltas_of(q_insert)["rows"] == 30
    assert snap.deltas_of(q_select)["calls"] == 7
    assert snap.deltas_of(q_select)["rows"] == 7

    # 2. Known keys: delta = now - before, exactly; untouched statements store nothing.
    run(c, select, 4, params=(0,))
    collect(server)
    snap = snapshots(server)[-1]
    assert snap.deltas_of(q_select)["calls"] == 4
    assert snap.deltas_of(q_select)["rows"] == 4
    assert snap.deltas_of(q_insert) is None
    truth = server_entry(c, f"SELECT count(*) FROM {table}%")
    stored_us = sum(s.deltas_of(q_select)["total_exec_us"] for s in snapshots(server)[1:] if s.deltas_of(q_select))
    assert stored_us == round(truth["total_exec_time"] * 1000)  # telescoping: exact to the microsecond

    # 3. Reset of one queryid, then fewer calls than before: counted from zero.
    _reset(c, q_select)
    run(c, select, 3, params=(0,))
    collect(server)
    assert snapshots(server)[-1].deltas_of(q_select)["calls"] == 3

    # 4. Full reset. From 14 on, stats_reset moves and every entry restarts, whatever its counters;
    #    13 has no stats_reset, so only counters going backwards reveal it.
    _reset(c)
    n = 2 if major == 13 else 20
    run(c, select, n, params=(0,))
    after_reset = collect(server)
    snap = snapshots(server)[-1]
    assert snap.deltas_of(q_select)["calls"] == n
    assert snap.full_reset is (major >= 14)
    assert after_reset.dealloc_delta == (None if major == 13 else 0)

    # 5. Restart (save = on keeps the counters): delta = what ran after, not the whole history.
    c.restart()
    run(c, select, 5, params=(0,))
    collect(server)
    snap = snapshots(server)[-1]
    assert snap.deltas_of(q_select)["calls"] == 5
    assert snap.full_reset is False
    assert all(s.interval_s > 0 for s in snapshots(server)[1:])


@pytest.mark.parametrize("major", (17, 18))
def test_stats_since_reveals_a_reset_entry_with_more_calls(pg_clusters, major):
    """17+: an entry reset and re-created with more calls than before is still counted from zero."""
    c = pg_clusters[major]
    run(c, "DROP TABLE IF EXISTS gt_since; CREATE TABLE gt_since (id int)")
    stmt = "SELECT count(*) FROM gt_since"
    server = register(c)
    run(c, stmt, 2)
    collect(server)
    queryid = server_entry(c, "SELECT count(*) FROM gt_since%")["queryid"]
    _reset(c, queryid)
    run(c, stmt, 9)
    collect(server)
    assert snapshots(server)[-1].deltas_of(queryid)["calls"] == 9


def test_eviction_dealloc_delta_matches_the_server(evict_cluster):
    """pg_stat_statements.max = 100 and 150 distinct statements: the stored dealloc delta equals the
    change of pg_stat_statements_info.dealloc, and survivors' deltas stay exact."""
    c = evict_cluster
    run(c, "".join(f"CREATE TABLE IF NOT EXISTS ev_{i} (id int);" for i in range(150)))
    # The worker's evict cluster is shared by its files in turn: whatever an earlier one left with more usage than
    # the survivor below (a storm's hot statements) could make it the one evicted. The test starts from none.
    _reset(c)
    server = register(c)
    run(c, "SELECT count(*) FROM ev_0", 1)
    collect(server)
    (before,) = c.execute("SELECT dealloc FROM pg_stat_statements_info", dbname="app")[0]
    for i in range(150):
        run(c, f"SELECT count(*) FROM ev_{i}")
    run(c, "SELECT count(*) FROM ev_149", 6)  # 7 calls in all, created late: it survives
    result = collect(server)
    (after,) = c.execute("SELECT dealloc FROM pg_stat_statements_info", dbname="app")[0]
    assert after > before
    # The counter as each snapshot read it: when the cluster is already full (an earlier test filled it),
    # a new entry from the test's own reads or the collector's queries evicts too, so the server's count
    # moves a little outside the snapshots' instants. The delta is exact between the two readings.
    previous, latest = snapshots(server)[-2:]
    assert previous.dealloc <= before < latest.dealloc <= after
    assert result.dealloc_delta == latest.dealloc_delta == latest.dealloc - previous.dealloc
    assert latest.dealloc - previous.dealloc >= (150 - 100) // 10  # each pass evicts at least 10 entries
    assert result.gone_entries > 0
    survivor = server_entry(c, "SELECT count(*) FROM ev_149%")
    assert snapshots(server)[-1].deltas_of(survivor["queryid"])["calls"] == survivor["calls"] == 7


def test_track_planning_is_stored_per_interval(pg_clusters):
    c = pg_clusters[16]
    run(c, "DROP TABLE IF EXISTS gt_plan; CREATE TABLE gt_plan (id int)")
    stmt = "SELECT count(*) FROM gt_plan a JOIN gt_plan b USING (id)"
    server = register(c)
    collect(server)
    run(c, stmt, 3)
    collect(server)
    c.set_config({"pg_stat_statements.track_planning": "on"})
    try:
        run(c, stmt, 6)
        collect(server)
    finally:
        c.set_config({"pg_stat_statements.track_planning": "off"})
    off, on = snapshots(server)[1], snapshots(server)[2]
    queryid = server_entry(c, "SELECT count(*) FROM gt_plan a%")["queryid"]
    assert off.track_planning is False and off.deltas_of(queryid)["plans"] == 0
    assert on.track_planning is True
    assert on.deltas_of(queryid)["plans"] == 6
    assert on.deltas_of(queryid)["total_plan_us"] > 0


def test_monitoring_role_sees_only_what_it_may(pg_clusters):
    """A role without pg_read_all_stats collects its own entries and says what it cannot see."""
    c = pg_clusters[15]
    c.execute("DROP ROLE IF EXISTS limited")
    c.execute("CREATE ROLE limited LOGIN PASSWORD 'limited-pw'")
    run(c, "SELECT 42 AS other_users_statement")
    server = register(c, user="limited", password="limited-pw")
    result = collect(server)
    assert "entries of other roles are not visible" in " ".join(result.notes)
    server.refresh_from_db()
    assert "pg_read_all_stats" in server.status_notes
    with psycopg.connect(c.dsn("app", "limited", "limited-pw")) as conn:
        own = conn.execute("SELECT count(*) FROM pg_stat_statements WHERE queryid IS NOT NULL").fetchone()[0]
    assert 0 < result.entries <= own + 5
