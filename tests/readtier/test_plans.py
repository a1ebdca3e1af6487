"""readtier/plans.py over plans stored by the real writer: a statement's shapes with the current first, its last
EXPLAIN, one plan by fingerprint, and its plan changes within a window, each named by what the plans read."""

from datetime import UTC, datetime, timedelta

import pytest

from collectors.redact import redact
from history import plans
from history.models import Statement
from readtier import PlanChangeRow, Window, plan_changes, plan_changes_by_statement, plan_detail, statement_plans
from readtier.db import counting
from tests.plans_world import a_statement, one_node_plan

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 28, 12, tzinfo=UTC)


@pytest.fixture
def statement():
    return a_statement(T0)


def test_a_plan_that_changes_shape_and_back_is_two_changes_each_named_by_what_it_reads(statement):
    sid, server_id = statement.pk, statement.server_id
    plans.record_plan(server_id, sid, one_node_plan("Index Scan", 8.3, 10), at=T0, redact=redact)
    plans.record_plan(
        server_id, sid, one_node_plan("Index Scan", 8.4, 10), at=T0 + timedelta(hours=1), redact=redact
    )  # same shape
    plans.record_plan(server_id, sid, one_node_plan("Seq Scan", 4100.0, 10), at=T0 + timedelta(hours=2), redact=redact)
    plans.record_plan(
        server_id, sid, one_node_plan("Index Scan", 8.3, 10), at=T0 + timedelta(hours=3), redact=redact
    )  # back
    changes = plan_changes(server_id=server_id, window=Window(T0, T0 + timedelta(days=1)))
    assert [(c.at, c.before, c.after) for c in changes] == [
        (T0 + timedelta(hours=2), ["Index Scan on orders"], ["Seq Scan on orders"]),
        (T0 + timedelta(hours=3), ["Seq Scan on orders"], ["Index Scan on orders"]),
    ]
    assert changes[0].described == "the plan changed from Index Scan on orders to Seq Scan on orders"
    assert plan_changes(server_id=server_id, window=Window(T0, T0 + timedelta(hours=2))) == []  # the end is open
    assert plan_changes(server_id=server_id, window=Window(T0, T0 + timedelta(days=1)), statement_ids=[sid + 1]) == []
    # By statement, for the regression alert and the weekly report: each statement's changes, oldest first; no
    # query at all for no statement.
    day = Window(T0, T0 + timedelta(days=1))
    assert plan_changes_by_statement(server_id=server_id, window=day, statement_ids=[sid, sid + 1]) == {sid: changes}
    with counting() as c:
        assert plan_changes_by_statement(server_id=server_id, window=day, statement_ids=[]) == {}
    assert c.queries == 0

    found = statement_plans(server_id=server_id, statement_id=sid)
    assert [p.access_paths for p in found.plans] == [["Index Scan on orders"], ["Seq Scan on orders"]]
    assert found.current.last_seen_at == T0 + timedelta(hours=3) and found.current.total_cost == 8.3
    assert found.attempt.code == plans.PLANNED
    # The changes go with their statement.
    Statement.objects.filter(pk=sid).delete()
    plans.prune_orphans(server_id)
    assert plan_changes(server_id=server_id, window=Window(T0, T0 + timedelta(days=1))) == []


def test_a_statement_never_explained_has_no_plan_and_no_attempt(statement):
    found = statement_plans(server_id=statement.server_id, statement_id=statement.pk)
    assert found.plans == [] and found.current is None and found.attempt is None
    with pytest.raises(LookupError):
        plan_detail(server_id=statement.server_id, fingerprint="0" * 32)


def test_a_plan_by_fingerprint_is_a_statements_own_only_when_asked_for_its(statement):
    """A shape of the server another statement was planned with is not this statement's plan (its page and the API
    answer 404), though the server has it."""
    server_id = statement.server_id
    keys = {"userid": statement.userid, "dbid": statement.dbid, "queryid": statement.queryid + 1}
    other = Statement.objects.create(server_id=server_id, first_seen_at=T0, **keys)
    new = one_node_plan("Seq Scan", 4100.0, 10)
    plans.record_plan(server_id, other.pk, new, at=T0, redact=redact)
    assert plan_detail(server_id=server_id, fingerprint=new.fingerprint).fingerprint == new.fingerprint
    assert plan_detail(server_id=server_id, fingerprint=new.fingerprint, statement_id=other.pk).node_count == 1
    with pytest.raises(LookupError, match="no such plan of this statement"):
        plan_detail(server_id=server_id, fingerprint=new.fingerprint, statement_id=statement.pk)


def test_a_change_of_joins_alone_is_named_so():
    paths = ["Seq Scan on orders", "Index Scan using customers_pkey on customers"]
    change = PlanChangeRow(1, T0, paths, list(reversed(paths)), "a" * 32, "b" * 32)
    assert change.described == (
        "the plan changed its joins, reading the same "
        "(Index Scan using customers_pkey on customers, Seq Scan on orders)"
    )
