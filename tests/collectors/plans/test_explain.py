"""collectors/plans/explain.py on real PostgreSQL 13 to 18: generic plans of normalized texts, DML planned and never
run, read-only, timeouts, permissions and the search path of the statement's role."""

import json
import time
import types

import psycopg
import pytest

from collectors.connection import PINNED_OPTIONS
from collectors.plans import explain as explaining
from collectors.plans.explain import Plan, Unexplained, explain, role_search_path
from tests.world import APP_DB, MONITOR_PASSWORD, MONITOR_USER, held_exclusive

# Connected as the console connects (collectors/connection.py): its settings pinned, no prepared statements of
# psycopg's own.
CONSOLE = {"autocommit": True, "prepare_threshold": None, "options": PINNED_OPTIONS}
MAJORS = (13, 14, 15, 16, 17, 18)
LIMITS = {"statement_timeout_ms": 2000, "lock_timeout_ms": 200}


def _setup(c) -> None:
    c.execute(
        "DROP TABLE IF EXISTS plan_orders; "
        "CREATE TABLE plan_orders (id int PRIMARY KEY, customer int, note text); "
        "CREATE INDEX plan_orders_customer ON plan_orders (customer); "
        "INSERT INTO plan_orders SELECT g, g % 1000, 'n' || g FROM generate_series(1, 20000) g; "
        "ANALYZE plan_orders",
        dbname=APP_DB,
    )


def _count(c) -> int:
    return c.execute("SELECT count(*) FROM plan_orders", dbname=APP_DB)[0][0]


def _nodes(plan: dict) -> list[str]:
    found, stack = [], [plan["Plan"]]
    while stack:
        node = stack.pop()
        found.append(node["Node Type"])
        stack.extend(node.get("Plans", []))
    return found


@pytest.mark.parametrize("major", MAJORS)
def test_a_normalized_select_and_dml_are_planned_and_the_dml_never_runs(pg_clusters, major):
    c = pg_clusters[major]
    _setup(c)
    version = major * 10000
    with psycopg.connect(c.dsn(APP_DB), **CONSOLE) as conn:
        select = explain(
            conn,
            "SELECT * FROM plan_orders WHERE customer = $1 AND note LIKE 'n%'",
            role="postgres",
            server_version_num=version,
            **LIMITS,
        )
        assert isinstance(select, Plan), select
        assert select.method == "prepare"
        assert {"Bitmap Heap Scan", "Index Scan"} & set(_nodes(select.plan)), _nodes(select.plan)  # ~20 of 20,000
        assert select.plan["Plan"]["Plan Rows"] >= 1
        for text in (
            "INSERT INTO plan_orders VALUES ($1, $2, $3)",
            "UPDATE plan_orders SET note = $1 WHERE customer = $2",
            "DELETE FROM plan_orders WHERE id > $1",
        ):
            planned = explain(conn, text, role="postgres", server_version_num=version, **LIMITS)
            assert isinstance(planned, Plan), (text, planned)
            assert _nodes(planned.plan)[0] == "ModifyTable"
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0  # none left behind
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert _count(c) == 20000  # nothing inserted, updated or deleted
    assert c.execute("SELECT count(*) FROM plan_orders WHERE note NOT LIKE 'n%'", dbname=APP_DB)[0][0] == 0


@pytest.mark.parametrize("major", [13, 16])
def test_what_cannot_be_planned_gets_its_reason(pg_clusters, major):
    c = pg_clusters[major]
    _setup(c)
    version = major * 10000
    with psycopg.connect(c.dsn(APP_DB), **CONSOLE) as conn:

        def reason(text: str) -> Unexplained:
            found = explain(conn, text, role="postgres", server_version_num=version, **LIMITS)
            assert isinstance(found, Unexplained), (text, found)
            return found

        assert reason("SELECT * FROM plan_nowhere WHERE id = $1").code == "gone"
        assert reason("SELECT nowhere FROM plan_orders").code == "gone"
        # Nothing in the text gives $1 or $3 a type: Parse is told they are text, one at a time, and $2 is inferred.
        untyped = "SELECT count(*) FROM plan_orders WHERE $1 IS NULL AND id = $2 AND $3 IS NOT NULL"
        assert isinstance(explain(conn, untyped, role="postgres", server_version_num=version, **LIMITS), Plan)
        assert reason("SELECT * FROM plan_orders WHERE").code == "syntax"  # cut after the last word
        assert reason("CREATE INDEX ON plan_orders (note)").code == "utility"  # never sent
        assert reason("SELECT 1; DELETE FROM plan_orders").code == "several"  # never sent
        assert isinstance(explain(conn, "SELECT $2", role="postgres", server_version_num=version, **LIMITS), Plan)
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0
    assert c.execute("SELECT count(*) FROM pg_indexes WHERE tablename = 'plan_orders'", dbname=APP_DB)[0][0] == 2
    assert _count(c) == 20000


@pytest.mark.parametrize("major", [14, 17])
def test_the_monitoring_role_without_the_right_to_read_gets_the_reason_and_then_the_plan(pg_clusters, major):
    c = pg_clusters[major]
    _setup(c)
    c.execute("REVOKE pg_read_all_data FROM monitor", dbname=APP_DB)
    with psycopg.connect(c.dsn(APP_DB, MONITOR_USER, MONITOR_PASSWORD), **CONSOLE) as conn:
        refused = explain(
            conn,
            "SELECT note FROM plan_orders WHERE id = $1",
            role="postgres",
            server_version_num=major * 10000,
            **LIMITS,
        )
        assert isinstance(refused, Unexplained) and refused.code == "permission", refused
        assert "permission denied" in refused.reason
        c.execute("GRANT pg_read_all_data TO monitor", dbname=APP_DB)
        try:
            planned = explain(
                conn,
                "SELECT note FROM plan_orders WHERE id = $1",
                role="postgres",
                server_version_num=major * 10000,
                **LIMITS,
            )
            # Reading is not writing: the DML of a role that may only read is refused, with its reason.
            dml = explain(
                conn,
                "DELETE FROM plan_orders WHERE id = $1",
                role="postgres",
                server_version_num=major * 10000,
                **LIMITS,
            )
        finally:
            c.execute("REVOKE pg_read_all_data FROM monitor", dbname=APP_DB)
    assert isinstance(planned, Plan) and _nodes(planned.plan)[0] == "Index Scan"
    assert isinstance(dml, Unexplained) and dml.code == "permission"


def test_a_table_held_under_an_exclusive_lock_is_given_up_at_the_lock_timeout(pg_clusters):
    c = pg_clusters[15]
    _setup(c)
    with held_exclusive(c, "plan_orders"), psycopg.connect(c.dsn(APP_DB), **CONSOLE) as conn:
        started = time.monotonic()
        found = explain(
            conn, "SELECT * FROM plan_orders WHERE id = $1", role="postgres", server_version_num=150000, **LIMITS
        )
        waited = time.monotonic() - started
    assert isinstance(found, Unexplained) and found.code == "timeout", found
    assert waited < 1.5, waited  # the lock timeout (0.2 s), not the statement's nor the holder's


@pytest.mark.parametrize("major", [13, 18])
def test_names_resolve_as_for_the_statements_role(pg_clusters, major):
    """A text that means another table for the monitoring role is planned with the statement role's search path:
    its setting in this database, else its own, else "$user", public with its name."""
    c = pg_clusters[major]
    _setup(c)
    c.execute(
        "DROP SCHEMA IF EXISTS plan_app CASCADE; DROP SCHEMA IF EXISTS plan_owner CASCADE; "
        "DROP ROLE IF EXISTS plan_app; DROP ROLE IF EXISTS plan_owner; "
        "CREATE ROLE plan_app; CREATE ROLE plan_owner; "
        "CREATE SCHEMA plan_app; CREATE TABLE plan_app.plan_orders (only_in_app int); "
        "CREATE SCHEMA plan_owner; CREATE TABLE plan_owner.plan_orders (only_for_owner int); "
        f"ALTER ROLE plan_app IN DATABASE {APP_DB} SET search_path = plan_app, public",
        dbname=APP_DB,
    )
    version = major * 10000
    with psycopg.connect(c.dsn(APP_DB), **CONSOLE) as conn:
        assert role_search_path(conn, "plan_app") == "plan_app, public"
        assert role_search_path(conn, "plan_owner") == "plan_owner, public"  # "$user" is the role's own name
        app = explain(
            conn, "SELECT only_in_app FROM plan_orders", role="plan_app", server_version_num=version, **LIMITS
        )
        owner = explain(
            conn, "SELECT only_for_owner FROM plan_orders", role="plan_owner", server_version_num=version, **LIMITS
        )
        other = explain(
            conn, "SELECT only_in_app FROM plan_orders", role="postgres", server_version_num=version, **LIMITS
        )
        session_path = conn.execute("SHOW search_path").fetchone()[0]
    assert isinstance(app, Plan) and app.search_path == "plan_app, public"
    assert isinstance(owner, Plan) and owner.search_path == "plan_owner, public"
    assert isinstance(other, Unexplained) and other.code == "gone"  # public.plan_orders has no such column
    assert (
        session_path == "pg_catalog,pg_temp"
    )  # the search path was the transaction's alone: the session's own is back


def test_planning_that_would_take_minutes_is_given_up_at_the_statement_timeout(pg_clusters):
    """A statement whose planning takes minutes (thousands of partitions, a huge IN list; here an immutable
    function the planner folds into a constant, sleeping a minute) is given up at the statement timeout with the
    reason "timeout", and leaves no backend working on it."""
    c = pg_clusters[16]
    _setup(c)
    c.execute(
        "CREATE OR REPLACE FUNCTION plan_slow_fold() RETURNS int LANGUAGE plpgsql IMMUTABLE "
        "AS $$ BEGIN PERFORM pg_sleep(60); RETURN 1; END $$",
        dbname=APP_DB,
    )
    text = "SELECT note FROM plan_orders WHERE id = plan_slow_fold()"
    with psycopg.connect(c.dsn(APP_DB), **CONSOLE) as conn:
        started = time.monotonic()
        found = explain(
            conn, text, role="postgres", server_version_num=160000, statement_timeout_ms=300, lock_timeout_ms=200
        )
        waited = time.monotonic() - started
        busy = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE state = 'active' AND query LIKE %s AND pid <> pg_backend_pid()",
            ("%plan_slow_fold%",),
        ).fetchone()[0]
    assert isinstance(found, Unexplained) and found.code == "timeout", found
    assert "canceling statement due to statement timeout" in found.reason
    assert waited < 1.5 and busy == 0, (waited, busy)


def _partitioned(c, partitions: int) -> None:
    c.execute(
        "DROP TABLE IF EXISTS plan_parts; CREATE TABLE plan_parts (id int, v int) PARTITION BY RANGE (id); "
        + "".join(
            f"CREATE TABLE plan_parts_{n} PARTITION OF plan_parts FOR VALUES FROM ({n * 100}) TO ({n * 100 + 100}); "
            for n in range(partitions)
        ),
        dbname=APP_DB,
    )


@pytest.mark.parametrize("major", [13, 17])
def test_a_plan_larger_than_the_cap_is_refused_with_its_size_and_never_parsed(
    pg_clusters, major, settings, monkeypatch
):
    """A statement over a table of 200 partitions, none pruned by a generic plan: its plan is some hundreds of kB of
    JSON. Over PLANS_MAX_PLAN_BYTES it gets the reason "too_large" with both sizes, and the reply is measured, not
    parsed; under it, the plan."""
    c = pg_clusters[major]
    _partitioned(c, 200)
    text = "SELECT * FROM plan_parts WHERE v = $1"
    parsed = []

    def loads(raw):
        parsed.append(len(raw))
        return json.loads(raw)

    monkeypatch.setattr(explaining, "json", types.SimpleNamespace(loads=loads))
    settings.PLANS = {**settings.PLANS, "MAX_PLAN_BYTES": 50_000}
    with psycopg.connect(c.dsn(APP_DB), **CONSOLE) as conn:
        refused = explain(conn, text, role="postgres", server_version_num=major * 10000, **LIMITS)
        assert parsed == [] and isinstance(refused, Unexplained), refused
        settings.PLANS = {**settings.PLANS, "MAX_PLAN_BYTES": 10 * 2**20}
        planned = explain(conn, text, role="postgres", server_version_num=major * 10000, **LIMITS)
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert refused.code == "too_large" and refused.reason.startswith("the server's plan is larger than the console")
    assert refused.reason.endswith(
        f"{parsed[0]:,} bytes of EXPLAIN output, over the 50,000 bytes a plan may take (PLANS_MAX_PLAN_BYTES)"
    )
    assert isinstance(planned, Plan) and len(parsed) == 1 and parsed[0] > 50_000
    assert _nodes(planned.plan).count("Seq Scan") == 200
