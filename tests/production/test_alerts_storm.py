"""The deallocation storm raising alerts as production does: a real PostgreSQL 14 with pg_stat_statements.max =
100 under the storm workload, collected by beat and a real worker, advised by the advisor's beat task, the rules
evaluated by beat's alerts task and the notifications sent by the worker to a real receiver on loopback.

The storm opens its alerts, each notified once however often beat evaluates: the deallocation rate, and the
advisor's critical recommendation to raise pg_stat_statements.max with its exact change. When the workload
stops, the rate's alert resolves within its window, then the advice's as the advisor's shortest window quiets
down below critical: each resolution sent once.

The advisor's shortest window, the last hour in production, is the last minute here (ADVISOR_SHORT_WINDOW_S):
a sustained rate must hold over it and over the whole history, so the advice ends a minute after the storm
whatever its rate. With the hour, it ended only once the history's average fell below 10/s, (rate / 10 - 1)
times the storm's length later, which forced a storm paced just above 10/s (26/s on a quiet machine), and that
fell to 9.5/s, below the rule, on a loaded one. The storm runs at 4 transactions a second per client (about
50/s on a quiet machine, 19/s or more on a loaded one)."""

from __future__ import annotations

import json
import threading

import psycopg
import pytest

from alerts.conditions import SUSTAINED_SHARE
from alerts.models import Alert, Delivery, Rule
from alerts.services import channel_create
from devenv import workloads
from history.models import Statement, TextStatus
from inventory.models import Server
from tests.alerts.receiver import receiver
from tests.processes import beat_argv, console_env, processes, succeeded, wait_for, wait_for_more, worker_argv
from tests.world import register

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _events(r) -> list[tuple[str, str]]:
    """(event, alert id) of every request the receiver got: the id is the condition's, whatever its words."""
    return [(body["event"], body["alert"]["id"]) for body in (json.loads(q.body) for q in r.requests)]


@pytest.mark.timeout(1080)
def test_a_storm_opens_its_alerts_once_and_resolves_them_once_when_it_stops(evict_cluster, tmp_path):
    server = register(evict_cluster, name="storm", org="alerting-storm")
    Server.objects.filter(pk=server.pk).update(interval_s=5)
    org = server.organization
    # Only the two rules the storm is about (an organization with rules gets no defaults), each at once.
    Rule.objects.create(organization=org, name="storm", kind="dealloc", dealloc_minutes=1, hold_minutes=0)
    Rule.objects.create(organization=org, name="critical advice", kind="advisor", hold_minutes=0)
    env = console_env(DISPATCH_TICK_S="1", ADVISOR_INTERVAL_S="5", ADVISOR_SHORT_WINDOW_S="60", ALERTS_EVALUATE_S="2")
    stop = threading.Event()
    storm = threading.Thread(
        target=workloads.dealloc_storm,
        args=(evict_cluster.dsn("app"), stop),
        kwargs={"clients": 16, "tables": 128, "tx_per_s": 4.0},
        daemon=True,
    )
    with receiver(200) as r, processes(tmp_path, env) as procs:
        channel_create(organization=org, name="on call", kind="webhook", target=r.url)
        worker = procs.start("worker", [*worker_argv(concurrency=4)])
        procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        storm.start()
        try:
            wait_for(
                lambda: _sent(r, _alert(server, "dealloc")) and _sent(r, _alert(server, "advisor", MAX_CHANGE)),
                300,
                what="the storm's rate and the advisor's max sent",
                logs=procs.logs,
            )
        finally:
            stop.set()
            storm.join(60)
        rate, advice = _alert(server, "dealloc"), _alert(server, "advisor", MAX_CHANGE)
        wait_for(lambda: ("resolve", rate.dedup_key) in _events(r), 240, what="the rate resolved", logs=procs.logs)
        # The advisor judges the rate over its shortest window too (a minute here): once it is quiet, its
        # recommendation falls below critical, and the alert on critical advice resolves.
        wait_for(lambda: ("resolve", advice.dedup_key) in _events(r), 480, what="the advice resolved", logs=procs.logs)
        # Beat has the rules evaluated again, several times: nothing more goes out.
        evaluated = lambda: succeeded(worker, "alerts.tasks.evaluate_alerts")  # noqa: E731
        wait_for_more(evaluated, 3, 60, what="the rules evaluated again", logs=procs.logs)
    events = _events(r)
    alerts = list(Alert.objects.filter(server=server).select_related("rule"))
    for alert in alerts:  # each alert's opening sent once, whatever beat evaluated meanwhile
        assert events.count(("open", alert.dedup_key)) == 1, alert.title
    assert events.count(("resolve", rate.dedup_key)) == 1
    assert len(events) == len(alerts) + sum(a.state == "resolved" for a in alerts)
    rate.refresh_from_db()
    # As it last held: at or above the rule's 10/s for at least half of its minute (the minute's mean may be lower
    # by then, as the storm ends: 8.3/s in a run on a loaded machine).
    assert rate.state == "resolved" and rate.figures["threshold_per_s"] == 10
    assert rate.figures["share_above"] >= SUSTAINED_SHARE and rate.figures["peak_dealloc_per_s"] >= 10
    assert events.count(("resolve", advice.dedup_key)) == 1
    advice.refresh_from_db()
    assert advice.state == "resolved" and advice.severity == "critical"  # as it was when it last held
    opened, resolved = [json.loads(q.body) for q in r.requests if json.loads(q.body)["alert"]["id"] == advice.dedup_key]
    assert (opened["event"], resolved["event"]) == ("open", "resolve")
    assert opened["alert"]["severity"] == "critical" and MAX_CHANGE in opened["alert"]["summary"]
    assert "pg_stat_statements.max" in opened["alert"]["title"] and resolved["alert"]["summary"].startswith(
        "Resolved at"
    )
    assert set(Delivery.objects.filter(alert__server=server).values_list("status", flat=True)) == {"sent"}

    # Every statement of the storm's own, counted by query id, has its text (defect 3 of issue 35: one of 120
    # had none after a minute).
    storm_ids = _storm_queryids(evict_cluster)
    seen = {
        q: (text, status)
        for q, text, status in Statement.objects.filter(
            server=server, queryid__in=list(storm_ids), toplevel=True
        ).values_list("queryid", "query", "text_status")
    }
    # Most of the storm's 128: those whose entries were evicted between every two snapshots are never seen (101
    # to 128 in the runs so far, as the storm's length varies).
    assert len(seen) >= 64, len(seen)
    assert [(q, got) for q, got in seen.items() if got[1] != TextStatus.STORED or got[0] not in storm_ids[q]] == []


def _storm_queryids(cluster) -> dict[int, tuple[str, str]]:
    """Query id -> the texts pg_stat_statements may keep of each of the storm's statements
    (devenv/workloads.dealloc_storm): normalized, or as run when its entry was evicted between the statement's
    parsing and its end (pg_stat_statements creates the entry again then, from the text it has)."""
    with psycopg.connect(cluster.dsn("app"), autocommit=True) as conn:
        conn.execute("SET pg_stat_statements.track = 'none'")  # EXPLAIN would add entries of its own
        out = {}
        for k in range(1, workloads.STORM_TABLES + 1):
            plan = conn.execute(f'EXPLAIN (VERBOSE, FORMAT JSON) SELECT 1 FROM "t{k}"').fetchone()[0]
            out[plan[0]["Query Identifier"]] = (f'SELECT $1 FROM "t{k}"', f'SELECT 1 FROM "t{k}"')
    return out


MAX_CHANGE = "ALTER SYSTEM SET pg_stat_statements.max = "


def _alert(server: Server, kind: str, change: str = "") -> Alert | None:
    return Alert.objects.filter(server=server, rule__kind=kind, change_text__contains=change).order_by("pk").first()


def _sent(r, alert: Alert | None) -> bool:
    return alert is not None and ("open", alert.dedup_key) in _events(r)
