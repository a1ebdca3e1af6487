"""readings/plans/service.py through real collections of a real server: a top statement's plan stored by shape, a
dropped index a new shape, a statement of another database planned there, one gone from pg_stat_statements
given its reason."""

import pytest

from history.models import PlanAttempt, PlanShape, StatementPlan
from readings.plans.service import statement_plan
from tests.world import collect, register, run, server_entry

pytestmark = pytest.mark.django_db(transaction=True)


def _statement(server, c, like: str):
    queryid = server_entry(c, like)["queryid"]  # pg_stat_statements of the monitored database: every database's
    return server.statements.get(queryid=queryid)


def test_a_statements_plan_is_stored_by_shape_and_a_dropped_index_makes_another(pg_clusters):
    c = pg_clusters[17]
    c.execute(
        "DROP TABLE IF EXISTS svc_orders; CREATE TABLE svc_orders (id int, customer int); "
        "INSERT INTO svc_orders SELECT g, g % 1000 FROM generate_series(1, 20000) g; "
        "CREATE INDEX svc_orders_customer ON svc_orders (customer); ANALYZE svc_orders; "
        "GRANT SELECT ON svc_orders TO monitor",
        dbname="app",
    )
    server = register(c)
    collect(server)
    run(c, "SELECT count(*) FROM svc_orders WHERE customer = %s", 3, params=(7,))
    collect(server)
    statement = _statement(server, c, "SELECT count(*) FROM svc_orders WHERE customer%")

    first = statement_plan(server_id=server.pk, statement_id=statement.pk)
    assert first.planned, first
    assert any("svc_orders_customer" in p for p in first.access_paths), first.access_paths
    c.execute("DROP INDEX svc_orders_customer", dbname="app")
    second = statement_plan(server_id=server.pk, statement_id=statement.pk)
    assert second.planned and second.shape_id != first.shape_id
    assert "Seq Scan on svc_orders" in second.access_paths and not any(
        "svc_orders_customer" in p for p in second.access_paths
    )
    rows = StatementPlan.objects.filter(server_id=server.pk, statement_id=statement.pk)
    assert {r.shape_id for r in rows} == {first.shape_id, second.shape_id}
    assert PlanShape.objects.filter(server_id=server.pk).count() == 2
    assert c.execute("SELECT count(*) FROM svc_orders", dbname="app")[0][0] == 20000


def test_a_statement_of_another_database_is_planned_there_and_a_gone_one_gets_its_reason(pg_clusters):
    c = pg_clusters[16]
    c.execute("DROP DATABASE IF EXISTS plans_other")
    c.execute("CREATE DATABASE plans_other")
    c.execute(
        "CREATE TABLE only_here (id int PRIMARY KEY); GRANT SELECT ON only_here TO monitor; "
        "GRANT CONNECT ON DATABASE plans_other TO monitor",
        dbname="plans_other",
    )
    server = register(c)
    collect(server)
    run(c, "SELECT id FROM only_here WHERE id = %s", 2, params=(1,), dbname="plans_other")
    collect(server)
    statement = _statement(server, c, "SELECT id FROM only_here%")
    assert statement.database_name == "plans_other"
    outcome = statement_plan(server_id=server.pk, statement_id=statement.pk)
    assert outcome.planned and outcome.access_paths == ["Index Only Scan using only_here_pkey on only_here"], outcome

    c.execute(f"SELECT pg_stat_statements_reset(0, 0, {statement.queryid})", dbname="app")
    gone = statement_plan(server_id=server.pk, statement_id=statement.pk)
    assert not gone.planned and gone.code == "text" and "no longer holds" in gone.reason
    attempt = PlanAttempt.objects.get(server_id=server.pk, statement_id=statement.pk)
    assert attempt.code == "text" and StatementPlan.objects.filter(statement_id=statement.pk).count() == 1
