"""/api/v1/statements/{id}/plans/: a statement's plans from a real server's real EXPLAINs (its shapes, the current
first, and its last EXPLAIN's reason), one plan by fingerprint as JSON and text, and a fresh EXPLAIN asked for by
a DBA, run by a real Celery worker on the `plans` queue and polled to its fingerprint, within the user's EXPLAIN
rates (429 with Retry-After past them); viewers read, outsiders get 404s, and every response is checked against
the schema."""

from __future__ import annotations

import itertools
import os
import time

import pytest
import redis
from django.utils import timezone

from collectors.plans.service import statement_plan
from history.models import PlanShape, Statement
from inventory.models import Server
from tests.api_world import assert_error
from tests.processes import console_env, processes, worker_argv
from tests.world import collect, register, run, server_entry

pytestmark = pytest.mark.django_db(transaction=True)
_tables = itertools.count(1)


@pytest.fixture
def planned(api_world, pg_clusters):
    """A server of acme's with a statement planned twice: with its index, then without (two shapes)."""
    c = pg_clusters[16]
    table = f"api_orders_{os.getpid()}_{next(_tables)}"  # a new table is a new queryid: one entry per test
    c.execute(
        f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int, customer int); "
        f"INSERT INTO {table} SELECT g, g % 500 FROM generate_series(1, 10000) g; "
        f"CREATE INDEX {table}_customer ON {table} (customer); ANALYZE {table}; "
        f"GRANT SELECT ON {table} TO monitor",
        dbname="app",
    )
    server = register(c, org=api_world.acme.name)
    collect(server)
    run(c, f"SELECT count(*) FROM {table} WHERE customer = %s", 2, params=(3,))
    collect(server)
    statement = server.statements.get(
        queryid=server_entry(c, f"SELECT count(*) FROM {table} WHERE customer%")["queryid"]
    )
    with_index = statement_plan(server_id=server.pk, statement_id=statement.pk)
    c.execute(f"DROP INDEX {table}_customer", dbname="app")
    without = statement_plan(server_id=server.pk, statement_id=statement.pk)
    assert with_index.planned and without.planned and with_index.fingerprint != without.fingerprint
    statement.table = table
    return statement, with_index, without


def test_a_statements_plans_the_current_first_and_each_by_fingerprint(api_world, planned):
    statement, with_index, without = planned
    viewer = api_world.client("viewer", read_only=True)
    body = viewer.get(f"/api/v1/statements/{statement.pk}/plans/").json()
    assert [p["fingerprint"] for p in body["plans"]] == [without.fingerprint, with_index.fingerprint]
    assert body["plans"][0]["access_paths"] == without.access_paths and body["plans"][0]["method"] == "prepare"
    assert body["last_attempt"]["code"] == "planned" and body["last_attempt"]["reason"] == ""
    # The current plan (its index dropped) reads the table whole for one customer in 500: it asks for the index.
    (asked,) = body["index_candidates"]
    assert (asked["table"], asked["columns"], asked["method"], asked["partition_of"]) == (
        statement.table,
        ["customer"],
        "estimated",
        None,
    )
    assert asked["cost_after"] < asked["cost_before"] and asked["selectivity"] == pytest.approx(1 / 500, rel=0.3)

    one = viewer.get(body["plans"][1]["plan_url"]).json()
    stored = PlanShape.objects.get(server_id=statement.server_id, fingerprint=with_index.fingerprint)
    assert one["plan"] == stored.plan and one["access_paths"] == with_index.access_paths
    assert f"{statement.table}_customer" in one["text"] and one["text"].splitlines()[0].startswith(
        stored.plan["Plan"]["Node Type"]
    )
    assert_error(viewer.get(f"/api/v1/statements/{statement.pk}/plans/{'0' * 32}/"), 404)
    assert_error(api_world.client("outsider").get(f"/api/v1/statements/{statement.pk}/plans/"), 404)
    assert_error(api_world.client("outsider").get(body["plans"][1]["plan_url"]), 404)


def test_a_fresh_explain_is_run_by_the_plans_worker_and_polled_to_its_plan(api_world, planned, tmp_path):
    statement, _, without = planned
    url = f"/api/v1/statements/{statement.pk}/plans/"
    assert_error(api_world.client("viewer").post(url), 403)  # it costs the monitored server: DBAs and admins
    assert_error(api_world.client("dba", read_only=True).post(url), 403)
    assert_error(api_world.client("outsider").post(url), 404)
    dba = api_world.client("dba")
    with processes(tmp_path, console_env()) as procs:
        worker = procs.start("plans", [*worker_argv(name="plans"), "--queues", "plans"])
        r = dba.post(url)
        assert r.status_code == 202 and r.json()["status"] in ("queued", "running", "succeeded"), r.content
        deadline = time.monotonic() + 60
        while (state := dba.get(r.json()["status_url"]).json())["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, worker.text()[-3000:]
            time.sleep(0.3)
    assert state["status"] == "succeeded", (state, worker.text()[-3000:])
    assert state["result"] == {
        "ok": True,
        "kind": "plan",
        "error_code": None,
        "reason": "",
        "fingerprint": without.fingerprint,  # the same shape as before: no index since
    }
    assert_error(api_world.client("outsider").get(r.json()["status_url"]), 404)


def test_explains_asked_past_the_users_rates_get_429_with_retry_after(api_world, settings):
    """A minute's and an hour's rate per user, all their tokens and the Plan tab's button together: past either,
    429 with Retry-After and nothing queued; another user has their own."""
    settings.PAGE_RATES = {**settings.PAGE_RATES, "explain": "2/min", "explain_hourly": "3/hour"}
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("plans")
    server = Server.objects.create(organization=api_world.acme, name="rated-plans", host="192.0.2.1", user="m")
    statement = Statement.objects.create(
        server=server, userid=10, dbid=5, queryid=77, first_seen_at=timezone.now(), query="SELECT $1"
    )
    url = f"/api/v1/statements/{statement.pk}/plans/"
    dba = api_world.client("dba")
    try:
        assert [dba.post(url).status_code for _ in range(2)] == [202, 202]
        refused = api_world.client("dba").post(url)  # another token of the same user: the same count
        assert "Too many EXPLAINs asked for: try again in " in assert_error(refused, 429, "throttled")["message"]
        assert 0 < int(refused["Retry-After"]) <= 60  # the minute's
        assert broker.llen("plans") == 2  # the refused one was not queued
        settings.PAGE_RATES = {**settings.PAGE_RATES, "explain": "10/min", "explain_hourly": "3/hour"}
        admin = api_world.client("admin")
        assert [admin.post(url).status_code for _ in range(3)] == [202, 202, 202]
        late = admin.post(url)
        assert_error(late, 429, "throttled")
        assert 60 < int(late["Retry-After"]) <= 3600  # the hour's
    finally:
        broker.delete("plans")
