"""An index dropped under load, end to end on a real PostgreSQL: the statement's plan read with its index, the index
dropped while the statement runs, the regression rule finding the statement slower than on the previous days and,
while it waits out its hold, sending the statement to a real `plans` worker, whose EXPLAIN records the change; the
alert that opens names it, and the statement page's charts mark it.

The previous days are real collections of the same server and workload with the clock moved back (the monitored
server's snapshot time and this process's), as the regression rule reads them: from the hourly tier."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from datetime import UTC, timedelta

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from alerts.lifecycle import evaluate_organization
from alerts.models import Alert, Rule
from collectors.plans.service import statement_plan
from collectors.settings import instance
from history import rollups
from history.models import PlanChange
from inventory.models import Membership, Organization
from tests.console.views.test_statements import charts_of, page
from tests.processes import console_env, processes, wait_for, worker_argv
from tests.world import APP_DB, collect, register, server_entry

pytestmark = pytest.mark.django_db(transaction=True)

DAY = timedelta(days=1)


@contextlib.contextmanager
def _clock_back(monkeypatch, by: timedelta) -> Iterator[None]:
    """The monitored server's snapshot time and this process's clock, `by` earlier for the block."""
    read_meta, now = instance.read_meta, timezone.now

    def meta_back(conn, *args, **kwargs):
        meta = read_meta(conn, *args, **kwargs)
        meta.taken_at_us -= int(by.total_seconds() * 1_000_000)
        return meta

    with monkeypatch.context() as m:
        m.setattr(instance, "read_meta", meta_back)
        m.setattr(timezone, "now", lambda: now() - by)
        yield


@contextlib.contextmanager
def _load(dsn: str, query: str) -> Iterator[list[int]]:
    """`query` run over and over by one client, a customer at a time, for the block; -> [calls made]."""
    stop, calls = threading.Event(), [0]

    def loop() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                conn.execute(query, (calls[0] % 100_000,))
                calls[0] += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield calls
    finally:
        stop.set()
        thread.join(30)


def _collected_under_load(server, calls: list[int], at_least: int) -> None:
    """Two collections `at_least` calls of the load apart."""
    collect(server)
    start = calls[0]
    wait_for(lambda: calls[0] >= start + at_least, 30, what=f"{at_least} calls of the load")
    collect(server)


def test_an_index_dropped_under_load_is_the_plan_change_the_regression_alert_names_and_the_chart_marks(
    pg_clusters, monkeypatch, tmp_path
):
    c = pg_clusters[15]
    table = f"e2e_orders_{os.getpid()}"
    index = f"{table}_customer_idx"
    c.execute(
        f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int, customer int, note text); "
        f"INSERT INTO {table} SELECT g, g % 100000, repeat('n', 40) FROM generate_series(1, 200000) g; "
        f"CREATE INDEX {index} ON {table} (customer); ANALYZE {table}; GRANT SELECT ON {table} TO monitor",
        dbname=APP_DB,
    )
    org = Organization.objects.create(name="plan-e2e")
    server = register(c, org=org.name)
    Rule.objects.create(organization=org, name="slower", kind="regression", regression_days=2)  # hold: 15 min
    query = f"SELECT id, note FROM {table} WHERE customer = %s"

    with _load(c.dsn(APP_DB), query) as calls:
        # Two days ago and yesterday at this time: the statement with its index (a baseline of each day).
        for back in (2 * DAY, DAY):
            with _clock_back(monkeypatch, back):
                _collected_under_load(server, calls, 200)
        statement = server.statements.get(
            queryid=server_entry(c, f"SELECT id, note FROM {table} WHERE customer%")["queryid"]
        )
        with _clock_back(monkeypatch, DAY):
            with_index = statement_plan(server_id=server.pk, statement_id=statement.pk)
        assert with_index.planned and with_index.access_paths == [f"Index Scan using {index} on {table}"]

        # Today: the index dropped while the statement runs (DROP INDEX waits for the load's lock between calls).
        collect(server)
        c.execute(f"DROP INDEX {index}", dbname=APP_DB)
        _collected_under_load(server, calls, 50)
    rollups.roll_up()

    now = timezone.now()
    with processes(tmp_path, console_env()) as procs:
        procs.start("plans", [*worker_argv(name="plans"), "--queues", "plans"])
        # Pending: the regression waits out its hold, and its statement goes to the plans worker.
        evaluate_organization(organization=org, enqueue=lambda delivery: None, now=now)
        assert Alert.objects.get(rule__organization=org).state == Alert.State.PENDING
        wait_for(lambda: PlanChange.objects.filter(statement_id=statement.pk).exists(), 60, what="the plan change")
    (change,) = PlanChange.objects.filter(statement_id=statement.pk)
    assert change.at > now - timedelta(minutes=1)  # read by the worker now, not the plan of yesterday

    evaluate_organization(organization=org, enqueue=lambda delivery: None, now=now + timedelta(minutes=16))
    alert = Alert.objects.get(rule__organization=org)
    assert alert.state == Alert.State.OPEN and alert.key == f"statement:{statement.pk}"
    seen = change.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    assert alert.summary.endswith(
        f"Its plan changed (seen at {seen}): from Index Scan using {index} on {table} to Seq Scan on {table}."
    ), alert.summary
    assert alert.figures["ratio"] >= 2 and alert.figures["baseline_days"] == 2, alert.figures

    # The statement page: the change marked on each of its charts, named under them.
    viewer = get_user_model().objects.create_user("plan-e2e-viewer")
    Membership.objects.create(organization=org, user=viewer, role="viewer")
    client = Client()
    client.force_login(viewer)
    html = page(client, statement.pk)
    marked = int(change.at.timestamp() * 1000)
    charts = charts_of(html)
    assert charts and all(spec["markers"] == [{"x": marked, "label": "new plan"}] for spec in charts.values()), charts
    assert f"the plan changed from Index Scan using {index} on {table} to Seq Scan on {table}" in html
