"""collectors/plans/hypothetical.py on real servers: a selective filter gets its index, cost-verified by the planner
with hypopg on 15 (only in the session, none left) and estimated from pg_stats on 16; an unselective one gets none,
and says why; the DDL printed runs; a table never analyzed, or pg_stats hidden from the role, is said."""

import psycopg
import pytest

from collectors.plans import candidates, hypothetical
from collectors.plans.explain import Plan, explain
from tests.world import MONITOR_PASSWORD, MONITOR_USER

SELECTIVE = "SELECT * FROM hy_orders WHERE customer = $1 AND status = $2"
UNSELECTIVE = "SELECT count(*) FROM hy_orders WHERE status = $1"
TIMEOUTS = {"statement_timeout_ms": 5000, "lock_timeout_ms": 1000}


def _world(c):
    c.execute(
        "DROP TABLE IF EXISTS hy_orders, hy_fresh; "
        "CREATE TABLE hy_orders (id int PRIMARY KEY, customer int, status text, note text); "
        "INSERT INTO hy_orders SELECT g, g % 2000, (ARRAY['new','paid','sent'])[g % 3 + 1], 'n' "
        "FROM generate_series(1, 60000) g; ANALYZE hy_orders; "
        "CREATE TABLE hy_fresh (id int, k int); INSERT INTO hy_fresh SELECT g, g FROM generate_series(1, 20000) g; "
        f"GRANT SELECT ON hy_orders, hy_fresh TO {MONITOR_USER}",
        dbname="app",
    )


def _monitor(c):
    return psycopg.connect(c.dsn("app", MONITOR_USER, MONITOR_PASSWORD), autocommit=True)


def _judged(c, conn, text):
    version = int(c.execute("SHOW server_version_num")[0][0])
    plan = explain(conn, text, server_version_num=version, role=MONITOR_USER, **TIMEOUTS)
    assert isinstance(plan, Plan), plan
    return hypothetical.statement_candidates(
        conn, text, plan, server_version_num=version, role=MONITOR_USER, explaining=TIMEOUTS
    )


def test_with_hypopg_the_selective_filter_gets_its_index_cost_verified_and_none_is_left(pg_clusters):
    c = pg_clusters[15]
    _world(c)
    with _monitor(c) as conn:
        assert hypothetical.hypopg_installed(conn)[0] == "public"
        (found,) = _judged(c, conn, SELECTIVE)
        assert found.method == "cost-verified" and found.advised
        assert found.columns == ("customer", "status")  # the most selective first
        assert found.cost_after < found.cost_before / 10 and found.size_bytes > 0
        assert "Index Scan" in str(found.plan_after) and "btree_hy_orders" in str(found.plan_after)
        assert conn.execute("SELECT count(*) FROM hypopg()").fetchone()[0] == 0  # gone with the reset
        (none,) = _judged(c, conn, UNSELECTIVE)
        assert not none.advised and none.columns == ()
        assert "keeps about 33% of the table's 60,000 rows" in none.reason and "status (33% of the rows" in none.reason
    # The DDL printed runs, and the planner then takes the index as hypopg said it would.
    c.execute(found.ddl("hy_orders_customer_status_idx"), dbname="app")
    try:
        c.execute("ANALYZE hy_orders", dbname="app")
        plan = c.execute("EXPLAIN SELECT * FROM hy_orders WHERE customer = 5 AND status = 'new'", dbname="app")
        assert "hy_orders_customer_status_idx" in "\n".join(r[0] for r in plan)
    finally:
        c.execute("DROP INDEX hy_orders_customer_status_idx", dbname="app")


def test_without_hypopg_it_is_estimated_from_pg_stats(pg_clusters):
    c = pg_clusters[16]
    _world(c)
    with _monitor(c) as conn:
        assert hypothetical.hypopg_installed(conn) is None
        (found,) = _judged(c, conn, SELECTIVE)
        assert found.method == "estimated" and found.advised and found.columns == ("customer", "status")
        assert found.cost_after < found.cost_before and found.selectivity == pytest.approx(1 / 2000 / 3, rel=0.3)
        (none,) = _judged(c, conn, UNSELECTIVE)
        assert not none.advised and "33%" in none.reason


def test_a_table_never_analyzed_and_statistics_the_role_may_not_read_are_said(pg_clusters):
    c = pg_clusters[16]
    _world(c)
    with _monitor(c) as conn:
        (fresh,) = _judged(c, conn, "SELECT * FROM hy_fresh WHERE k = $1")
        assert not fresh.advised and "never analyzed" in fresh.reason
        plan = explain(
            conn, "SELECT * FROM hy_fresh WHERE k = $1", server_version_num=160000, role=MONITOR_USER, **TIMEOUTS
        )
    # Planned by the EXPLAIN helper, say, for a role that may not read the column: pg_stats hides its row.
    c.execute(f"ANALYZE hy_fresh; REVOKE SELECT ON hy_fresh FROM {MONITOR_USER}", dbname="app")
    with _monitor(c) as conn:
        (scan,) = candidates.scans(plan.plan)
        hidden = hypothetical.candidate(conn, scan, plan)
    assert not hidden.advised and "pg_stats has no row for its columns" in hidden.reason


FILTERED = "SELECT * FROM hy_orders WHERE customer = $1 AND note = $2"


def _filtered_world(c):
    """hy_orders with an index on customer only, and notes of 1,000 values: an index scan on customer that
    filters its rows by note."""
    _world(c)
    c.execute(
        "UPDATE hy_orders SET note = 'n' || (id % 1000); CREATE INDEX hy_orders_customer ON hy_orders (customer); "
        "ANALYZE hy_orders",
        dbname="app",
    )


@pytest.mark.parametrize("major", [15, 16])
def test_an_index_scan_that_filters_is_costed_with_hypopg_or_estimated(pg_clusters, major):
    c = pg_clusters[major]
    _filtered_world(c)
    with _monitor(c) as conn:
        (found,) = _judged(c, conn, FILTERED)
    assert found.table == "hy_orders" and found.advised and set(found.columns) == {"customer", "note"}
    assert found.method == ("cost-verified" if major == 15 else "estimated")
    if major == 16:
        # The index on customer fetches its 30 rows and the filter keeps one in a thousand of them; the new index
        # fetches only that one: the scan's cost falls in that proportion.
        assert found.columns == ("customer", "note")  # 2,000 customers against 1,000 notes: the customer first
        assert found.cost_after == pytest.approx(found.cost_before / 1000, rel=0.5)


ORDERED = "SELECT * FROM hy_orders WHERE customer = $1 ORDER BY status DESC LIMIT 5"


@pytest.mark.parametrize("major", [15, 16])
def test_the_order_by_of_a_sorted_scan_follows_its_equality_columns(pg_clusters, major):
    c = pg_clusters[major]
    _world(c)
    with _monitor(c) as conn:
        (found,) = _judged(c, conn, ORDERED)
        # A range on another column than the sort's: the index cannot give both, the range is kept.
        ranged_text = "SELECT * FROM hy_orders WHERE customer = $1 AND note > $2 ORDER BY status LIMIT 5"
        (ranged,) = _judged(c, conn, ranged_text)
    assert found.advised and found.columns == ("customer", "status")
    assert ranged.columns == ("customer", "note")
    if major == 15:  # the planner, given the index, reads it backwards and sorts nothing
        assert found.method == "cost-verified" and "Sort" not in str(found.plan_after)
        assert "'Scan Direction': 'Backward'" in str(found.plan_after)
        c.execute(found.ddl("hy_orders_customer_status_idx"), dbname="app")
        try:
            plan = c.execute(
                "EXPLAIN SELECT * FROM hy_orders WHERE customer = 5 ORDER BY status DESC LIMIT 5", dbname="app"
            )
            shown = "\n".join(r[0] for r in plan)
            assert "Index Scan Backward using hy_orders_customer_status_idx" in shown and "Sort" not in shown
        finally:
            c.execute("DROP INDEX hy_orders_customer_status_idx", dbname="app")


def test_a_hypopg_that_cannot_cost_the_index_leaves_the_estimate_and_says_why(pg_clusters):
    """hypopg of another version (here: without hypopg_relation_size, as an older or altered install might be) or
    a function the role may not run: the statistics' estimate stands, the reason names hypopg's version and its
    error, and no hypothetical index is left in the session."""
    c = pg_clusters[15]
    c.execute("DROP DATABASE IF EXISTS hy_other")
    c.execute("CREATE DATABASE hy_other")
    try:
        c.execute(
            "CREATE EXTENSION hypopg; ALTER EXTENSION hypopg DROP FUNCTION hypopg_relation_size(oid); "
            "DROP FUNCTION hypopg_relation_size(oid); "
            "CREATE TABLE hy_orders (id int PRIMARY KEY, customer int, status text, note text); "
            "INSERT INTO hy_orders SELECT g, g % 2000, 'new', 'n' FROM generate_series(1, 60000) g; "
            f"ANALYZE hy_orders; GRANT SELECT ON hy_orders TO {MONITOR_USER}",
            dbname="hy_other",
        )
        with psycopg.connect(c.dsn("hy_other", MONITOR_USER, MONITOR_PASSWORD), autocommit=True) as conn:
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'hypopg'").fetchone()[0]
            (found,) = _judged(c, conn, "SELECT * FROM hy_orders WHERE customer = $1")
            assert found.advised and found.method == "estimated" and found.columns == ("customer",)
            assert found.reason.startswith(f"hypopg {version} could not cost it (function ")
            assert "hypopg_relation_size" in found.reason and "does not exist" in found.reason
            assert conn.execute("SELECT count(*) FROM hypopg()").fetchone()[0] == 0
    finally:
        c.execute("DROP DATABASE IF EXISTS hy_other")


def test_a_partitioned_tables_scans_name_its_tree_read_once(pg_clusters):
    """Each partition's candidate names the partitioned table's tree; the plan's scans of its partitions read it
    once (one object for all), not once a partition."""
    c = pg_clusters[16]
    c.execute(
        "DROP TABLE IF EXISTS hy_parts; "
        "CREATE TABLE hy_parts (id int, region int, customer int) PARTITION BY LIST (region); "
        "CREATE TABLE hy_parts_1 PARTITION OF hy_parts FOR VALUES IN (1); "
        "CREATE TABLE hy_parts_2 PARTITION OF hy_parts FOR VALUES IN (2); "
        "CREATE TABLE hy_parts_3 PARTITION OF hy_parts FOR VALUES IN (3); "
        "INSERT INTO hy_parts SELECT g, g % 3 + 1, g % 3000 FROM generate_series(1, 90000) g; ANALYZE hy_parts; "
        f"GRANT SELECT ON hy_parts, hy_parts_1, hy_parts_2, hy_parts_3 TO {MONITOR_USER}",
        dbname="app",
    )
    try:
        with _monitor(c) as conn:
            found = _judged(c, conn, "SELECT * FROM hy_parts WHERE customer = $1")
        assert sorted(f.table for f in found) == ["hy_parts_1", "hy_parts_2", "hy_parts_3"]
        assert all(f.advised and f.columns == ("customer",) for f in found)
        tree = found[0].partition_of
        assert all(f.partition_of is tree for f in found)
        assert (tree["schema"], tree["table"]) == ("public", "hy_parts")
        assert [row[1] for row in tree["tree"]] == ["hy_parts", "hy_parts_1", "hy_parts_2", "hy_parts_3"]
    finally:
        c.execute("DROP TABLE hy_parts", dbname="app")
