"""The EXPLAIN helper (readings/plans/explain_helper.sql), installed as the docs say on real PostgreSQL 13 and 16
(its PREPARE path and its GENERIC_PLAN path): a monitoring role that may neither read nor write a table gets the
plans of its SELECT and its DML through it, nothing is ever run; the helper refuses several statements, a
read-write transaction and an owner who is a superuser, each with its reason."""

from __future__ import annotations

import psycopg
import pytest

from readings.check import CheckFinding
from readings.plans.explain import HELPER_SQL, Plan, Unexplained, explain, helper_usable
from tests.readings.test_check import check
from tests.world import APP_DB, MONITOR_PASSWORD, MONITOR_USER

LIMITS = {"statement_timeout_ms": 2000, "lock_timeout_ms": 200}


def _install(c) -> None:
    """The helper as a DBA installs it: the file as shipped, for this test's monitoring role."""
    c.execute(HELPER_SQL.read_text().replace("pgconsole_monitor", MONITOR_USER), dbname=APP_DB)


def _remove(c) -> None:
    c.execute(
        "DROP SCHEMA IF EXISTS pgconsole CASCADE; "
        "DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgconsole_explainer') THEN "
        "DROP OWNED BY pgconsole_explainer; DROP ROLE pgconsole_explainer; END IF; END $$",
        dbname=APP_DB,
    )


@pytest.fixture(params=[13, 16])
def helped(request, pg_clusters):
    c = pg_clusters[request.param]
    if request.param >= 14:
        c.execute("REVOKE pg_read_all_data FROM monitor", dbname=APP_DB)
    c.execute(
        "DROP TABLE IF EXISTS helper_orders; "
        "CREATE TABLE helper_orders (id int PRIMARY KEY, customer int, note text); "
        "CREATE INDEX helper_orders_customer ON helper_orders (customer); "
        "INSERT INTO helper_orders SELECT g, g % 1000, 'n' || g FROM generate_series(1, 20000) g; "
        "ANALYZE helper_orders",
        dbname=APP_DB,
    )
    _remove(c)
    yield c, request.param * 10000
    _remove(c)


def _count(c) -> tuple[int, int]:
    return c.execute("SELECT count(*), count(*) FILTER (WHERE note LIKE 'n%') FROM helper_orders", dbname=APP_DB)[0]


def _plans_finding(c) -> CheckFinding:
    report = check(c)
    assert report.connected, report.failure
    return next(f for f in report.findings if f.topic == "Plans")


def _as_monitor(c) -> psycopg.Connection:
    return psycopg.connect(c.dsn(APP_DB, MONITOR_USER, MONITOR_PASSWORD), autocommit=True)


def test_the_monitoring_role_plans_through_the_helper_what_it_may_neither_read_nor_write(helped):
    c, version = helped
    select, dml = (
        "SELECT note FROM helper_orders WHERE customer = $1",
        "UPDATE helper_orders SET note = $1 WHERE id = $2",
    )
    with _as_monitor(c) as conn:
        assert not helper_usable(conn)
        refused = explain(conn, select, role="postgres", server_version_num=version, **LIMITS)
        assert isinstance(refused, Unexplained) and refused.code == "permission", refused
        before = _plans_finding(c)
        _install(c)
        assert helper_usable(conn)
        after = _plans_finding(c)
        planned = {
            text: explain(conn, text, role="postgres", server_version_num=version, **LIMITS)
            for text in (select, dml, "INSERT INTO helper_orders VALUES ($1, $2, $3)", "DELETE FROM helper_orders")
        }
        left = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
        # The role itself still may not read the table: only the helper plans it.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM helper_orders")
    for text, plan in planned.items():
        assert isinstance(plan, Plan) and plan.via_helper, (text, plan)
        assert plan.method == ("generic_plan" if version >= 160000 else "prepare")
    assert planned[select].plan["Plan"]["Node Type"] in ("Bitmap Heap Scan", "Index Scan"), planned[select].plan
    assert planned[dml].plan["Plan"]["Node Type"] == "ModifyTable"
    assert left == 0  # the helper's PREPARE does not outlive its call
    # "Test connection" says which way the plans are read, and how to get them.
    assert before.level == "info" and "install the EXPLAIN helper" in before.text and before.fix.startswith("GRANT")
    assert after.level == "ok" and f"installed in database '{APP_DB}'" in after.text and after.fix == ""
    assert _count(c) == (20000, 20000)  # nothing inserted, updated or deleted


def test_the_helper_refuses_several_statements_a_read_write_transaction_and_a_superuser_owner(helped):
    c, version = helped
    _install(c)
    with _as_monitor(c) as conn:

        def reason(text: str) -> Unexplained:
            """What explain() says when the helper refuses (a text the console's own check would have refused
            first is sent to the helper directly below)."""
            found = explain(conn, text, role="postgres", server_version_num=version, **LIMITS)
            assert isinstance(found, Unexplained), (text, found)
            return found

        def direct(text: str, read_only: bool = True) -> str:
            """The helper called as any holder of EXECUTE may call it: its error."""
            with pytest.raises(psycopg.Error) as refused, conn.transaction():
                if read_only:
                    conn.execute("SET TRANSACTION READ ONLY")
                conn.execute("SELECT pgconsole.explain_generic(%s, 'public')", (text,))
            return refused.value.diag.message_primary

        assert "one statement" in direct("SELECT 1; DELETE FROM helper_orders")
        assert "one statement" in direct("SELECT 1; SELECT pg_sleep(10)")
        assert direct("VACUUM helper_orders")  # EXPLAIN plans no utility statement (nor PREPARE on 13)
        assert "read-only transaction" in direct("DELETE FROM helper_orders", read_only=False)
        assert reason("SELECT * FROM helper_nowhere WHERE id = $1").code == "gone"

        c.execute("ALTER FUNCTION pgconsole.explain_generic(text, text) OWNER TO postgres", dbname=APP_DB)
        owned = reason("SELECT note FROM helper_orders WHERE id = $1")
        assert owned.code == "permission" and "owned by a superuser" in owned.reason, owned
    assert _count(c) == (20000, 20000)
