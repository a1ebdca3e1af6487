"""collectors/plans/service.py through real collections of a real server: a top statement's plan stored by shape, a
dropped index a new shape, a statement of another database planned there, one gone from pg_stat_statements
given its reason; an EXPLAIN asked for within its organization's share of the plans worker; a text or a plan over
its cap refused with its size; both connections of a plan at one address."""

import pytest

from collectors import shares
from collectors.plans.service import OVER_SHARE, plans_slot, statement_plan, statement_plan_in_share
from history.models import PlanAttempt, PlanShape, PlanSpend, StatementPlan
from tests.collectors.test_shares import Holder
from tests.world import collect, name_switched_after_first_lookup, register, run, server_entry

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


def test_an_explain_asked_for_waits_for_its_organizations_share_of_the_plans_worker(pg_clusters, settings):
    """ORG_MAX_PLANNING at 1 and one plan job of the organization running elsewhere (another thread's session, as
    another worker's): the EXPLAIN is refused with why, nothing stored nor spent; once the slot is let go, it runs."""
    settings.ORG_MAX_PLANNING = 1
    c = pg_clusters[15]
    server = register(c, org="plans-tenant")
    collect(server)
    run(c, "SELECT count(*) FROM pg_class WHERE relpages > %s", 2, params=(7,))
    collect(server)
    statement = _statement(server, c, "SELECT count(*) FROM pg_class WHERE relpages >%")
    with Holder(server.organization_id, 1, shares.PLANS_NAMESPACE):
        refused = statement_plan_in_share(server_id=server.pk, statement_id=statement.pk)
        with plans_slot(server.pk) as why:
            assert why == refused.reason
    assert (refused.planned, refused.code) == (False, OVER_SHARE)
    assert refused.reason == "the plans worker was running 1 plan job of plans-tenant, its share (ORG_MAX_PLANNING)"
    assert not PlanAttempt.objects.filter(server_id=server.pk).exists()
    assert not PlanSpend.objects.filter(server_id=server.pk).exists()
    assert statement_plan_in_share(server_id=server.pk, statement_id=statement.pk).planned
    assert shares.running(server.organization_id, namespace=shares.PLANS_NAMESPACE) == 0  # let go after it
    # The organization's own limit wins: none for this one.
    server.organization.max_planning = 0
    server.organization.save()
    with Holder(server.organization_id, 1, shares.PLANS_NAMESPACE), plans_slot(server.pk) as why:
        assert why == ""


def test_a_text_or_a_plan_over_its_cap_is_not_read_and_says_why(pg_clusters, settings):
    c = pg_clusters[15]
    c.execute(
        "DROP TABLE IF EXISTS svc_capped; CREATE TABLE svc_capped (id int PRIMARY KEY, note text); "
        "GRANT SELECT ON svc_capped TO monitor",
        dbname="app",
    )
    server = register(c)
    collect(server)
    run(c, "SELECT note FROM svc_capped WHERE id = %s", 2, params=(1,))
    collect(server)
    statement = _statement(server, c, "SELECT note FROM svc_capped WHERE id%")
    size = len(statement.query.encode())

    settings.PLANS = {**settings.PLANS, "MAX_TEXT_BYTES": size - 1}
    text = statement_plan(server_id=server.pk, statement_id=statement.pk)
    assert (text.planned, text.code) == (False, "too_large")
    assert text.reason == (
        f"the statement's text is {size} bytes, longer than the {size - 1} bytes the console sends to EXPLAIN "
        "(PLANS_MAX_TEXT_BYTES)"
    )
    settings.PLANS = {**settings.PLANS, "MAX_TEXT_BYTES": size, "MAX_PLAN_BYTES": 100}
    plan = statement_plan(server_id=server.pk, statement_id=statement.pk)
    assert (plan.planned, plan.code) == (False, "too_large") and "(PLANS_MAX_PLAN_BYTES)" in plan.reason
    attempt = PlanAttempt.objects.get(server_id=server.pk, statement_id=statement.pk)
    assert (attempt.code, attempt.reason) == ("too_large", plan.reason)
    assert not StatementPlan.objects.filter(statement_id=statement.pk).exists()
    settings.PLANS = {**settings.PLANS, "MAX_PLAN_BYTES": 2**20}
    assert statement_plan(server_id=server.pk, statement_id=statement.pk).planned


def test_the_statements_database_is_dialled_at_the_address_the_text_was_read_from(pg_clusters, monkeypatch):
    """The server's name switched to the metadata service's address between the plan's two connections: the
    second goes where the first went."""
    c = pg_clusters[17]
    c.execute(
        "DROP TABLE IF EXISTS svc_pinned; CREATE TABLE svc_pinned (id int PRIMARY KEY); "
        "GRANT SELECT ON svc_pinned TO monitor",
        dbname="app",
    )
    server = register(c)
    collect(server)
    run(c, "SELECT id FROM svc_pinned WHERE id = %s", 2, params=(1,))
    collect(server)
    statement = _statement(server, c, "SELECT id FROM svc_pinned%")
    looked_up = name_switched_after_first_lookup(monkeypatch, server)
    outcome = statement_plan(server_id=server.pk, statement_id=statement.pk)
    assert outcome.planned, outcome
    assert looked_up == [server.host]
