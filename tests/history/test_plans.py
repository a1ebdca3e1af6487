"""history/plans.py: a plan stored once per shape, a statement's plans by shape, its last EXPLAIN, redaction, and
plans that go with their statement."""

from datetime import UTC, datetime, timedelta

import pytest

from history import plans
from history.models import PlanAttempt, PlanShape, Statement, StatementPlan
from inventory.models import Organization, Server

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 28, 12, tzinfo=UTC)


def _plan(node: str, cost: float, rows: float, filter_: str = "(customer = $1)") -> plans.NewPlan:
    plan = {
        "Plan": {"Node Type": node, "Relation Name": "orders", "Total Cost": cost, "Plan Rows": rows, "Filter": filter_}
    }
    return plans.NewPlan(
        plan=plan,
        fingerprint=node.replace(" ", "").ljust(32, "0")[:32],
        access_paths=[f"{node} on orders"],
        node_count=1,
        method="generic_plan",
    )


@pytest.fixture
def statement():
    org = Organization.objects.create(name="plans")
    server = Server.objects.create(organization=org, name="p1", host="db1", database="app", user="m")
    return Statement.objects.create(server=server, userid=10, dbid=5, queryid=42, first_seen_at=T0)


def test_a_shape_is_stored_once_and_the_statement_keeps_one_row_per_shape(statement):
    sid, server_id = statement.pk, statement.server_id
    first = plans.record_plan(server_id, sid, _plan("Index Scan", 8.3, 10), at=T0)
    again = plans.record_plan(server_id, sid, _plan("Index Scan", 9.1, 12), at=T0 + timedelta(hours=6))
    other = plans.record_plan(server_id, sid, _plan("Seq Scan", 4100.0, 10), at=T0 + timedelta(hours=12))
    assert first == again != other and PlanShape.objects.filter(server_id=server_id).count() == 2
    rows = {r.shape_id: r for r in StatementPlan.objects.filter(server_id=server_id, statement_id=sid)}
    assert (rows[first].first_seen_at, rows[first].last_seen_at) == (T0, T0 + timedelta(hours=6))
    assert (rows[first].total_cost, rows[first].plan_rows) == (9.1, 12)  # the last plan's estimates
    assert rows[other].first_seen_at == T0 + timedelta(hours=12)
    assert PlanAttempt.objects.get(server_id=server_id, statement_id=sid).code == plans.PLANNED


def test_an_explain_without_a_plan_keeps_the_plans_and_says_why(statement):
    sid, server_id = statement.pk, statement.server_id
    plans.record_plan(server_id, sid, _plan("Index Scan", 8.3, 10), at=T0)
    plans.record_unexplained(
        server_id, sid, code="timeout", reason="planning took longer than its timeout", at=T0 + timedelta(hours=6)
    )
    attempt = PlanAttempt.objects.get(server_id=server_id, statement_id=sid)
    assert (attempt.code, attempt.at) == ("timeout", T0 + timedelta(hours=6)) and "timeout" in attempt.reason
    assert StatementPlan.objects.filter(server_id=server_id, statement_id=sid).count() == 1


def test_a_plans_strings_are_redacted_before_they_are_stored(statement):
    secret = "(dsn = 'postgresql://app:s3cret-pw@db1/app'::text)"
    shape_id = plans.record_plan(statement.server_id, statement.pk, _plan("Seq Scan", 1.0, 1, secret), at=T0)
    stored = PlanShape.objects.get(server_id=statement.server_id, id=shape_id).plan
    assert "s3cret-pw" not in str(stored) and stored["Plan"]["Node Type"] == "Seq Scan"
    assert stored["Plan"]["Total Cost"] == 1.0  # numbers as they were


def test_the_plans_of_a_statement_gone_from_the_dimension_go_with_it(statement):
    sid, server_id = statement.pk, statement.server_id
    plans.record_plan(server_id, sid, _plan("Index Scan", 8.3, 10), at=T0)
    assert plans.prune_orphans(server_id) == 0  # its statement is there
    Statement.objects.filter(pk=sid).delete()
    assert plans.prune_orphans(server_id) == 3  # its plan, its attempt, and the shape nobody has any more
    assert not PlanShape.objects.filter(server_id=server_id).exists()
