"""The EXPLAIN helper (collectors/plans/explain_helper.sql), installed as the docs say on real PostgreSQL 13 and 16: a
monitoring role that may neither read nor write a table gets the plans of its SELECT and its DML through it,
nothing is ever run; the helper refuses several statements, a read-write transaction and an owner who is a
superuser or reaches the server's files, each with its reason; nothing it evaluates is looked up in the statement
role's search path (finding H2 ii); and the console calls no function of that name in a schema a user made."""

from __future__ import annotations

import psycopg
import pytest

from collectors.connection import PINNED_OPTIONS
from collectors.connection_check import CheckFinding
from collectors.plans import explain as explaining
from collectors.plans.explain import HELPER_SQL, Plan, Unexplained, explain, helper_usable
from tests.collectors.test_connection_check import check
from tests.world import APP_DB, MONITOR_PASSWORD, MONITOR_USER

LIMITS = {"statement_timeout_ms": 2000, "lock_timeout_ms": 200}
# Connected as the console connects (collectors/connection.py): its settings pinned, no prepared statements of
# psycopg's own.
CONSOLE = {"autocommit": True, "prepare_threshold": None, "options": PINNED_OPTIONS}


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
    return psycopg.connect(c.dsn(APP_DB, MONITOR_USER, MONITOR_PASSWORD), **CONSOLE)


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
            conn.execute("SELECT count(*) FROM public.helper_orders")
    for text, plan in planned.items():
        assert isinstance(plan, Plan) and plan.via_helper, (text, plan)
        assert plan.method == "prepare"
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


# What the helper evaluates, each shadowed in public by a function of mallory's that tells her it ran (a better
# match for the helper's calls than PostgreSQL's, or the same: public comes first in the path she gives herself).
SHADOWS = """
CREATE FUNCTION public.current_setting(text) RETURNS text LANGUAGE plpgsql AS
    $$ BEGIN PERFORM pg_catalog.pg_notify('leak', 'current_setting'); RETURN pg_catalog.current_setting($1); END $$;
CREATE FUNCTION public.format(text, text) RETURNS text LANGUAGE plpgsql AS
    $$ BEGIN PERFORM pg_catalog.pg_notify('leak', 'format'); RETURN pg_catalog.format($1, $2); END $$;
CREATE FUNCTION public.regexp_matches(text, text, text) RETURNS SETOF text[] LANGUAGE plpgsql AS
    $$ BEGIN PERFORM pg_catalog.pg_notify('leak', 'regexp_matches');
       RETURN QUERY SELECT pg_catalog.regexp_matches($1, $2, $3); END $$;
CREATE FUNCTION public.array_to_string(text[], text) RETURNS text LANGUAGE plpgsql AS
    $$ BEGIN PERFORM pg_catalog.pg_notify('leak', 'array_to_string'); RETURN pg_catalog.array_to_string($1, $2); END $$;
CREATE FUNCTION public.position(text, text) RETURNS int LANGUAGE plpgsql AS
    $$ BEGIN PERFORM pg_catalog.pg_notify('leak', 'position'); RETURN pg_catalog.position($1, $2); END $$;
CREATE FUNCTION public.int4gt(int, int) RETURNS bool LANGUAGE plpgsql AS
    $$ BEGIN PERFORM pg_catalog.pg_notify('leak', '>'); RETURN pg_catalog.int4gt($1, $2); END $$;
CREATE OPERATOR public.> (leftarg = int, rightarg = int, function = public.int4gt);
"""


def test_nothing_the_helper_evaluates_is_looked_up_in_the_statement_roles_path(helped):
    c, _ = helped
    _install(c)
    c.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mallory') THEN CREATE ROLE mallory LOGIN; "
        "END IF; END $$; GRANT CREATE ON SCHEMA public TO mallory",
        dbname=APP_DB,
    )
    c.execute("SET ROLE mallory; " + SHADOWS, dbname=APP_DB)
    try:
        with _as_monitor(c) as conn, psycopg.connect(c.dsn(APP_DB), autocommit=True) as listener:
            listener.execute("LISTEN leak")
            with conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                conn.execute("SELECT pgconsole.explain_generic(%s, 'public, pg_catalog')", ("SELECT $1::int > 1",))
            assert [n.payload for n in listener.notifies(timeout=0.5, stop_after=10)] == []
            # The shadows are live: evaluated under that path, each is what runs.
            with conn.transaction():
                conn.execute("SELECT pg_catalog.set_config('search_path', 'public, pg_catalog', true)")
                conn.execute("SELECT current_setting('search_path'), format('%s', 'x'), 2 > 1")
            assert {n.payload for n in listener.notifies(timeout=1, stop_after=3)} == {"current_setting", "format", ">"}
    finally:
        c.execute(
            "DROP OPERATOR public.> (int, int); DROP FUNCTION public.current_setting(text), public.format(text, text), "
            "public.regexp_matches(text, text, text), public.array_to_string(text[], text), "
            "public.position(text, text), public.int4gt(int, int); REVOKE CREATE ON SCHEMA public FROM mallory",
            dbname=APP_DB,
        )


def test_the_helper_refuses_an_owner_who_may_write_the_servers_files(helped):
    c, version = helped
    _install(c)
    if version < 140000:
        c.execute("GRANT pg_write_server_files TO pgconsole_explainer")
    else:
        c.execute("GRANT pg_write_server_files TO pgconsole_explainer", dbname=APP_DB)
    with _as_monitor(c) as conn:
        refused = explain(
            conn, "SELECT note FROM helper_orders WHERE id = $1", role="postgres", server_version_num=version, **LIMITS
        )
    assert isinstance(refused, Unexplained) and "reaches the server's files" in refused.reason, refused
    c.execute("REVOKE pg_write_server_files FROM pgconsole_explainer")


def test_a_pgconsole_schema_a_user_made_is_neither_used_nor_installed_into(helped):
    c, version = helped
    c.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mallory') THEN CREATE ROLE mallory LOGIN; "
        "END IF; END $$; GRANT CREATE ON DATABASE app TO mallory",
        dbname=APP_DB,
    )
    c.execute(
        "SET ROLE mallory; CREATE SCHEMA pgconsole; GRANT USAGE ON SCHEMA pgconsole TO PUBLIC; "
        "CREATE FUNCTION pgconsole.explain_generic(statement text, path text) RETURNS json LANGUAGE sql "
        "SECURITY DEFINER AS 'SELECT pg_catalog.pg_notify(''leak'', current_user)::text::json'",
        dbname=APP_DB,
    )
    try:
        with _as_monitor(c) as conn:
            assert not helper_usable(conn)
            found = explain(
                conn,
                "SELECT note FROM helper_orders WHERE id = $1",
                role="postgres",
                server_version_num=version,
                **LIMITS,
            )
        assert not (isinstance(found, Plan) and found.via_helper), found
        with pytest.raises(psycopg.errors.RaiseException, match="not owned by a superuser"):
            _install(c)
    finally:
        c.execute("DROP SCHEMA pgconsole CASCADE; REVOKE CREATE ON DATABASE app FROM mallory", dbname=APP_DB)


def test_a_plan_the_helper_makes_larger_than_the_cap_is_measured_on_the_server_and_not_sent(
    helped, settings, monkeypatch
):
    """Through the helper the plan's size is measured on the server, which sends the plan only within
    PLANS_MAX_PLAN_BYTES: over it the reason "too_large", and no plan crossed the wire."""
    c, version = helped
    _install(c)
    sent = []
    bounded = explaining._bounded_plan

    def seen(raw, size_bytes):
        sent.append((raw is not None, size_bytes))
        return bounded(raw, size_bytes)

    monkeypatch.setattr(explaining, "_bounded_plan", seen)
    select = "SELECT note FROM helper_orders WHERE customer = $1"
    with _as_monitor(c) as conn:
        settings.PLANS = {**settings.PLANS, "MAX_PLAN_BYTES": 100}
        refused = explain(conn, select, role="postgres", server_version_num=version, **LIMITS)
        settings.PLANS = {**settings.PLANS, "MAX_PLAN_BYTES": 2**20}
        planned = explain(conn, select, role="postgres", server_version_num=version, **LIMITS)
    assert isinstance(refused, Unexplained) and refused.code == "too_large", refused
    assert "over the 100 bytes a plan may take (PLANS_MAX_PLAN_BYTES)" in refused.reason
    assert isinstance(planned, Plan) and planned.via_helper
    (first, second) = sent
    assert first[0] is False and first[1] > 100  # measured there, not sent
    assert second == (True, first[1])
