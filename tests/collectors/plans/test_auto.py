"""collectors/plans/auto.py through real collections of a real server: a server's top statements by total time (the
read tier's own ranking) planned the costliest first, each once per PLANS_INTERVAL_S, within the server's budget,
which stops a round at its first refusal and cuts an EXPLAIN's timeout to what is left of the hour, and within its
organization's share of the plans worker, which a round holds from its start to its end."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection

from collectors import shares
from collectors.plans.auto import due_statements, plan_top_statements
from collectors.plans.service import statement_plan
from history import plans
from history.models import PlanAttempt, PlanSpend, StatementPlan
from readtier import Page, StatementFilters, Window, top_statements
from tests.collectors.test_shares import Holder
from tests.world import collect, held_exclusive, register, run

pytestmark = pytest.mark.django_db(transaction=True)
TABLE = "auto_items"
WORKLOAD = (  # each statement's share of the window's time, costliest first
    (f"SELECT count(*), pg_sleep(0.12) FROM {TABLE}", 3),
    (f"SELECT max(id), pg_sleep(0.06) FROM {TABLE}", 2),
    (f"SELECT min(id) FROM {TABLE} WHERE id > 5", 1),
)


def _served(c):
    """A server of the cluster with WORKLOAD run between its two collections."""
    c.execute(
        f"DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE} (id int); "
        f"INSERT INTO {TABLE} SELECT generate_series(1, 100); GRANT SELECT ON {TABLE} TO monitor",
        dbname="app",
    )
    server = register(c)
    collect(server)
    for statement, times in WORKLOAD:
        run(c, statement, times)
    collect(server)
    server.cluster = c
    return server


@pytest.fixture
def server(pg_clusters):
    return _served(pg_clusters[15])


@pytest.mark.parametrize("major", [13, 14, 16, 17, 18])
def test_every_major_plans_its_top_statements(pg_clusters, major):
    """15 above; here each other major: the statement prepared in one Parse, then EXPLAIN EXECUTE, on every one."""
    server = _served(pg_clusters[major])
    done = plan_top_statements(server.pk)
    for sid in _ours(server):
        assert done.outcomes[sid].planned, (major, done.outcomes[sid])
        assert any(f"Seq Scan on {TABLE}" in p for p in done.outcomes[sid].access_paths)
    assert set(StatementPlan.objects.filter(server_id=server.pk).values_list("method", flat=True)) == {"prepare"}
    assert server.cluster.execute(f"SELECT count(*) FROM {TABLE}", dbname="app")[0][0] == 100


def _ranked(server, n: int) -> list[int]:
    """The statements the read tier ranks first by total time over the plans' interval (what the page shows)."""
    top = top_statements(
        server_id=server.pk,
        window=Window.last(timedelta(hours=6)),
        order="total",
        filters=StatementFilters(hide_own=True),  # the console's own collections, as the pages rank them
        page=Page(1, n),
    )
    return [row.statement_id for row in top.rows]


def _ours(server) -> list[int]:
    """The workload's statements' ids, in WORKLOAD's order (each told apart by its aggregate: count, max, min)."""
    ids = {s.query.split("(")[0]: s.pk for s in server.statements.filter(query__contains=TABLE)}
    return [ids[sql.split("(")[0]] for sql, _ in WORKLOAD]


def test_the_top_statements_are_planned_costliest_first_and_once_per_interval(server):
    done = plan_top_statements(server.pk)
    assert list(done.outcomes) == _ranked(server, 20)[: len(done.outcomes)]  # the page's order, costliest first
    costly, middle, cheap = _ours(server)
    order = list(done.outcomes)
    assert order.index(costly) < order.index(middle) < order.index(cheap)
    for sid in (costly, middle, cheap):
        assert done.outcomes[sid].planned, done.outcomes[sid]
    assert any(f"Seq Scan on {TABLE}" in p for p in done.outcomes[costly].access_paths)
    # The console's own collections ran between the two snapshots too: never among the plans' candidates.
    own = set(server.statements.filter(query__contains="pgconsole").values_list("pk", flat=True))
    assert own and not own & set(done.outcomes)

    again = plan_top_statements(server.pk)
    assert again.candidates == done.candidates and again.outcomes == {}  # each once per interval
    # Its last EXPLAIN an interval ago: due again.
    PlanAttempt.objects.filter(server_id=server.pk, statement_id=costly).update(
        at=PlanAttempt.objects.get(server_id=server.pk, statement_id=costly).at - timedelta(hours=6, seconds=1)
    )
    assert due_statements(server.pk)[1] == [costly]


def test_a_round_over_its_organizations_share_does_not_start_and_one_that_starts_holds_a_slot(
    server, settings, monkeypatch
):
    settings.ORG_MAX_PLANNING = 1
    org = server.organization_id
    with Holder(org, 1, shares.PLANS_NAMESPACE):
        refused = plan_top_statements(server.pk)
    assert refused.outcomes == {} and refused.candidates == 0
    assert refused.over_share.endswith("its share (ORG_MAX_PLANNING)")
    assert not PlanAttempt.objects.filter(server_id=server.pk).exists()
    held: list[int] = []
    plan = statement_plan

    def watched(**kwargs):  # a look at the share from outside the round's session, while it runs
        held.append(shares.running(org, namespace=shares.PLANS_NAMESPACE))
        return plan(**kwargs)

    from collectors.plans import auto

    monkeypatch.setattr(auto, "statement_plan", watched)
    done = plan_top_statements(server.pk)
    assert done.over_share == "" and all(o.planned for sid, o in done.outcomes.items() if sid in _ours(server))
    assert held and set(held) == {1}, held  # one slot, the whole round long
    assert shares.running(org, namespace=shares.PLANS_NAMESPACE) == 0


def test_only_the_top_n_are_candidates(server, settings):
    settings.PLANS = {**settings.PLANS, "TOP_N": 2}
    candidates, due = due_statements(server.pk)
    assert candidates == 2 and due == _ranked(server, 2)


def test_the_budget_stops_a_round_at_its_first_refusal_and_the_refused_stay_due(server, settings):
    settings.PLANS = {**settings.PLANS, "EXPLAINS_PER_HOUR": 1}
    done = plan_top_statements(server.pk)
    first, refused = list(done.outcomes.values())
    assert first.planned and done.stopped_by_budget
    assert refused.code == plans.BUDGET and "1 EXPLAINs this hour, of 1 (PLANS_EXPLAINS_PER_HOUR)" in refused.reason
    second = list(done.outcomes)[1]
    assert PlanAttempt.objects.get(server_id=server.pk, statement_id=second).code == plans.BUDGET
    assert second in due_statements(server.pk)[1]  # a refusal is no attempt: due at the next tick
    [spend] = PlanSpend.objects.filter(server_id=server.pk)
    assert spend.explains == 1 and 0 < spend.planning_ms < 1000 and spend.bytes > 0


def test_an_explains_timeout_is_cut_to_what_is_left_of_the_hours_planning(server, settings):
    """A table held under ACCESS EXCLUSIVE and a lock timeout longer than the hour's budget: the EXPLAIN is given up
    at the budget's 200 ms, said so, and the server's hour counts the time it really took."""
    settings.PLANS = {**settings.PLANS, "PLANNING_S_PER_HOUR": 0.2, "LOCK_TIMEOUT_MS": 5_000}
    costly = _ours(server)[0]
    with held_exclusive(server.cluster, TABLE):
        outcome = statement_plan(server_id=server.pk, statement_id=costly)
    assert outcome.code == "timeout", outcome
    assert "200 ms allowed: what was left of the server's planning budget for the hour" in outcome.reason
    [spend] = PlanSpend.objects.filter(server_id=server.pk)
    assert spend.explains == 1 and 200 <= spend.planning_ms < 1500
    assert server.cluster.execute(f"SELECT count(*) FROM {TABLE}", dbname="app")[0][0] == 100


def test_the_regressions_plan_task_plans_unless_fresh_and_says_when_its_statement_is_gone(server):
    from collectors.tasks import FRESH_S, plan_statement

    costly = _ours(server)[0]
    assert plan_statement(server.pk, costly, FRESH_S)["code"] == "planned"
    assert plan_statement(server.pk, costly, FRESH_S) == {"code": "fresh"}  # EXPLAINed a moment ago
    assert plan_statement(server.pk, costly)["code"] == "planned"  # asked by a DBA: whatever its age
    assert plan_statement(server.pk, 10**12, FRESH_S) == {"code": "gone"}
    assert PlanSpend.objects.get(server_id=server.pk).explains == 2


def test_a_server_that_cannot_be_read_stops_its_round_at_its_first_statement(server, settings):
    """Down (here: nothing listens on its port any more), each top statement would wait for a connection in turn;
    the round stops at the first, which says why, and none of them counts as an attempt: all stay due for the next
    round."""
    import socket

    from inventory.models import Server

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    Server.objects.filter(pk=server.pk).update(port=closed)
    done = plan_top_statements(server.pk)
    (outcome,) = done.outcomes.values()
    assert done.stopped_by_server and outcome.code == plans.SERVER and not outcome.planned, outcome
    assert outcome.reason.startswith("the server could not be read: ") and str(closed) not in outcome.reason
    # None counted as an attempt: every top statement is still due. (The ranking itself is the shared cluster's:
    # another test's statements between the two collections may rank above the workload's, or a reset drop it.)
    assert not PlanAttempt.objects.filter(server_id=server.pk).exclude(code__in=plans.NOT_ATTEMPTS).exists()
    ranked = _ranked(server, settings.PLANS["TOP_N"])
    assert ranked and due_statements(server.pk)[1] == ranked


def test_the_rounds_of_a_worker_take_their_turns_at_its_pace_whatever_its_threads(pg_clusters, settings, monkeypatch):
    """Two servers' rounds in two threads of one worker, at 5 EXPLAINs a second: every EXPLAIN of either round
    starts at least 0.2 s after the one before, so a tick's thousand rounds never take the CPU the collections
    need. (Unpaced in the other tests: tests/settings.py; the product's default, 2 a second, is the settings'.)"""
    from collectors.plans import auto

    settings.PLANS = {**settings.PLANS, "WORKER_EXPLAINS_PER_S": 5.0}
    servers = [_served(pg_clusters[15]), _served(pg_clusters[16])]
    started: list[float] = []
    plan = auto.statement_plan

    def timed(**kwargs):
        started.append(time.monotonic())
        return plan(**kwargs)

    def round_of(server_id: int) -> None:  # as a thread of the worker, with its own connection to the store
        try:
            plan_top_statements(server_id)
        finally:
            connection.close()

    monkeypatch.setattr(auto, "statement_plan", timed)
    rounds = [threading.Thread(target=round_of, args=(s.pk,)) for s in servers]
    for r in rounds:
        r.start()
    for r in rounds:
        r.join(60)
    assert len(started) >= 6, started  # three statements of ours each, the console's own left out
    # The pace grants a turn every 0.2 s; a thread can be late to start after its turn on a loaded machine (a gap
    # looks shorter when the one before it was late), never early: the whole takes its turns, and no two come at once.
    at = sorted(started)
    gaps = [b - a for a, b in zip(at, at[1:], strict=False)]
    assert at[-1] - at[0] >= (len(at) - 1) * 0.2 - 0.05 and min(gaps) >= 0.1, gaps
    assert all(StatementPlan.objects.filter(server_id=s.pk).exists() for s in servers)
