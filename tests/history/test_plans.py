"""history/plans.py: a plan stored once per shape, a statement's plans by shape, its last EXPLAIN, redaction, and
plans that go with their statement."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from collectors.redact import redact
from history import plans
from history.models import PlanAttempt, PlanShape, PlanSpend, Statement, StatementPlan
from inventory.models import Server
from tests.plans_world import a_statement, one_node_plan

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 28, 12, tzinfo=UTC)


@pytest.fixture
def statement():
    return a_statement(T0)


def test_a_shape_is_stored_once_and_the_statement_keeps_one_row_per_shape(statement):
    sid, server_id = statement.pk, statement.server_id
    first = plans.record_plan(server_id, sid, one_node_plan("Index Scan", 8.3, 10), at=T0, redact=redact)
    again = plans.record_plan(
        server_id, sid, one_node_plan("Index Scan", 9.1, 12), at=T0 + timedelta(hours=6), redact=redact
    )
    other = plans.record_plan(
        server_id, sid, one_node_plan("Seq Scan", 4100.0, 10), at=T0 + timedelta(hours=12), redact=redact
    )
    assert first.shape_id == again.shape_id != other.shape_id
    assert PlanShape.objects.filter(server_id=server_id).count() == 2
    # Bytes are counted once per shape: the budget's "bytes stored" is what a new shape adds.
    assert first.new_bytes > 0 and again.new_bytes == 0 and other.new_bytes > 0
    first, other = first.shape_id, other.shape_id
    rows = {r.shape_id: r for r in StatementPlan.objects.filter(server_id=server_id, statement_id=sid)}
    assert (rows[first].first_seen_at, rows[first].last_seen_at) == (T0, T0 + timedelta(hours=6))
    assert (rows[first].total_cost, rows[first].plan_rows) == (9.1, 12)  # the last plan's estimates
    assert rows[other].first_seen_at == T0 + timedelta(hours=12)
    assert PlanAttempt.objects.get(server_id=server_id, statement_id=sid).code == plans.PLANNED


def test_an_explain_without_a_plan_keeps_the_plans_and_says_why(statement):
    sid, server_id = statement.pk, statement.server_id
    plans.record_plan(server_id, sid, one_node_plan("Index Scan", 8.3, 10), at=T0, redact=redact)
    plans.record_unexplained(
        server_id, sid, code="timeout", reason="planning took longer than its timeout", at=T0 + timedelta(hours=6)
    )
    attempt = PlanAttempt.objects.get(server_id=server_id, statement_id=sid)
    assert (attempt.code, attempt.at) == ("timeout", T0 + timedelta(hours=6)) and "timeout" in attempt.reason
    assert StatementPlan.objects.filter(server_id=server_id, statement_id=sid).count() == 1


def test_a_plans_strings_are_redacted_before_they_are_stored(statement):
    secret = "(dsn = 'postgresql://app:s3cret-pw@db1/app'::text)"
    shape_id = plans.record_plan(
        statement.server_id, statement.pk, one_node_plan("Seq Scan", 1.0, 1, secret), at=T0, redact=redact
    ).shape_id
    stored = PlanShape.objects.get(server_id=statement.server_id, id=shape_id).plan
    assert "s3cret-pw" not in str(stored) and stored["Plan"]["Node Type"] == "Seq Scan"
    assert stored["Plan"]["Total Cost"] == 1.0  # numbers as they were


def test_the_plans_of_a_statement_gone_from_the_dimension_go_with_it(statement):
    sid, server_id = statement.pk, statement.server_id
    plans.record_plan(server_id, sid, one_node_plan("Index Scan", 8.3, 10), at=T0, redact=redact)
    assert plans.prune_orphans(server_id) == 0  # its statement is there
    Statement.objects.filter(pk=sid).delete()
    assert plans.prune_orphans(server_id) == 3  # its plan, its attempt, and the shape nobody has any more
    assert not PlanShape.objects.filter(server_id=server_id).exists()


BUDGET = plans.PlanBudget(explains_per_hour=3, planning_ms_per_hour=1000.0, bytes_per_day=10_000)


def test_the_budget_grants_what_is_left_of_the_hour_and_counts_what_was_used(statement):
    server_id = statement.server_id
    at = T0 + timedelta(minutes=10)
    first = plans.budget_reserve(server_id, BUDGET, at=at, want_ms=2000)
    assert first == plans.Grant(T0, 1000)  # the timeout cut to the hour's whole budget
    # While the first EXPLAIN runs, its grant is held: nothing is left for a second one of the same server.
    held = plans.budget_reserve(server_id, BUDGET, at=at, want_ms=2000)
    assert isinstance(held, plans.PlanRefused) and "0.00 s" not in held.reason and "1.00 s of planning" in held.reason
    plans.budget_settle(server_id, first, used_ms=120.0, new_bytes=900)
    second = plans.budget_reserve(server_id, BUDGET, at=at, want_ms=2000)
    assert second == plans.Grant(T0, 880)
    plans.budget_settle(server_id, second, used_ms=30.0, new_bytes=0)
    spend = PlanSpend.objects.get(server_id=server_id, hour=T0)
    assert (spend.explains, spend.planning_ms, spend.bytes) == (2, 150.0, 900)


def test_the_budget_refuses_past_its_explains_its_time_or_its_bytes_and_says_until_when(statement):
    server_id = statement.server_id
    for _ in range(3):
        grant = plans.budget_reserve(server_id, BUDGET, at=T0, want_ms=100)
        plans.budget_settle(server_id, grant, used_ms=5.0, new_bytes=0)
    refused = plans.budget_reserve(server_id, BUDGET, at=T0 + timedelta(minutes=59), want_ms=100)
    assert refused == plans.PlanRefused(
        "the server's plan budget is spent: 3 EXPLAINs this hour, of 3 (PLANS_EXPLAINS_PER_HOUR); more from 13:00 UTC"
    )
    assert isinstance(plans.budget_reserve(server_id, BUDGET, at=T0 + timedelta(hours=1), want_ms=100), plans.Grant)

    slow = plans.budget_reserve(server_id, BUDGET, at=T0 + timedelta(hours=2), want_ms=2000)
    plans.budget_settle(server_id, slow, used_ms=980.0, new_bytes=0)  # 20 ms left: less than any EXPLAIN needs
    refused = plans.budget_reserve(server_id, BUDGET, at=T0 + timedelta(hours=2, minutes=5), want_ms=2000)
    assert isinstance(refused, plans.PlanRefused) and "0.98 s of planning this hour, of 1.00 s" in refused.reason

    big = plans.budget_reserve(server_id, BUDGET, at=T0 + timedelta(hours=3), want_ms=100)
    plans.budget_settle(server_id, big, used_ms=5.0, new_bytes=10_000)
    refused = plans.budget_reserve(server_id, BUDGET, at=T0 + timedelta(hours=4), want_ms=100)
    assert isinstance(refused, plans.PlanRefused) and "10,000 bytes of new plans stored today" in refused.reason
    assert isinstance(plans.budget_reserve(server_id, BUDGET, at=T0 + timedelta(days=1), want_ms=100), plans.Grant)


def test_the_budgets_hour_is_the_utc_hour_whatever_the_zone_of_the_time_given(statement):
    """Per server and UTC hour: a time given in a zone half an hour off UTC (India's) counts in the same hour as the
    same instant in UTC, and the refusal's "more from" is that hour's end in UTC."""
    server_id, india = statement.server_id, timezone(timedelta(hours=5, minutes=30))
    for minutes in (10, 40):  # 17:40 and 18:10 in India: one UTC hour
        at = (T0 + timedelta(minutes=minutes)).astimezone(india)
        grant = plans.budget_reserve(server_id, BUDGET, at=at, want_ms=5)
        assert grant.hour == T0, grant
        plans.budget_settle(server_id, grant, used_ms=1.0, new_bytes=0)
    assert list(PlanSpend.objects.filter(server_id=server_id).values_list("hour", "explains")) == [(T0, 2)]
    plans.budget_settle(server_id, plans.budget_reserve(server_id, BUDGET, at=T0, want_ms=5), used_ms=1.0, new_bytes=0)
    refused = plans.budget_reserve(server_id, BUDGET, at=(T0 + timedelta(minutes=50)).astimezone(india), want_ms=5)
    assert isinstance(refused, plans.PlanRefused) and refused.reason.endswith("more from 13:00 UTC"), refused


def test_the_budgets_hours_are_forgotten_after_a_week_and_with_their_server(statement):
    server_id = statement.server_id
    for days in (0, 9):
        plans.budget_reserve(server_id, BUDGET, at=T0 + timedelta(days=days), want_ms=100)
    assert plans.spend_prune(T0 + timedelta(days=1)) == 1
    assert list(PlanSpend.objects.values_list("hour", flat=True)) == [T0 + timedelta(days=9)]
    Server.objects.filter(pk=server_id).delete()
    assert not PlanSpend.objects.exists()
