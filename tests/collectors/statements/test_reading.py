"""collectors/statements/reading.py: the snapshot's frame (baseline or delta, its time and interval) and the facts the
statements reading gives it, step by step on a real server."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.db import connection

from collectors import connection as monitored
from collectors.errors import ClockWentBack
from collectors.services import _load_previous
from collectors.settings.reading import READING as SETTINGS
from collectors.statements.reading import READING, running_totals
from collectors.unit import Collection
from history.columns import TOTAL_NAMES
from history.models import ServerState
from history.tables import TABLES
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)


def _read(server) -> Collection:
    snap = Collection(server=server, previous=_load_previous(server))
    target = monitored.monitoring_target(server)
    snap.conn = monitored.connect(target)
    try:
        for reading in (SETTINGS, READING):
            snap.read(reading)
    finally:
        snap.conn.close()
    return snap


def test_a_first_snapshot_is_a_baseline_and_the_next_an_interval_with_its_facts(pg_clusters):
    c = pg_clusters[17]
    run(c, "DROP TABLE IF EXISTS st_reading; CREATE TABLE st_reading (id int)")
    server = register(c)
    first = _read(server)
    assert first.baseline and first.status["statements"]["ok"]
    READING.compute(first, first.got["statements"])
    assert first.facts["kind"] == "baseline" and first.facts["new_entries"] == 0 and first.interval_s is None

    stored = collect(server)
    run(c, "INSERT INTO st_reading VALUES (1)", 4)
    second = _read(server)
    computed = READING.compute(second, second.got["statements"])
    assert not second.baseline and second.facts["kind"] == "delta"
    assert second.interval_s == pytest.approx((second.taken_at - stored.taken_at).total_seconds())
    assert second.facts["prev_taken_at"] == stored.taken_at and second.facts["changed"] == computed.booked.sum() >= 1
    assert second.state["taken_at"] == second.taken_at and second.state["new_entries"] == second.facts["new_entries"]


def test_a_server_clock_behind_the_previous_snapshot_fails_the_snapshot(pg_clusters):
    c = pg_clusters[17]
    server = register(c)
    collect(server)
    snap = _read(server)
    snap.meta.taken_at_us = int(snap.previous.state.taken_at.timestamp() * 1_000_000) - 1
    with pytest.raises(ClockWentBack, match="the server clock went back"):
        READING.compute(snap, snap.got["statements"])


def test_the_running_totals_are_the_sums_of_the_stored_deltas_and_only_grow(pg_clusters):
    c = pg_clusters[17]
    run(c, "DROP TABLE IF EXISTS st_totals; CREATE TABLE st_totals (id int)")
    server = register(c)
    first = collect(server)
    seen = []
    for n in (3, 7):
        run(c, "INSERT INTO st_totals VALUES (1)", n)
        collect(server)
        seen.append(ServerState.objects.get(server_id=server.pk))
    state = seen[-1]
    with connection.cursor() as cur:  # the totals columns the read tier sums (not fields of the model)
        cur.execute(
            f"SELECT sum(calls), sum(exec_us), sum(dealloc_delta) FROM {TABLES.SNAPSHOT.name} "
            "WHERE server_id = %s AND kind = 'delta'",
            [server.pk],
        )
        calls, exec_us, dealloc = cur.fetchone()
    sums = {"calls": calls, "exec_us": exec_us, "dealloc": dealloc}
    assert state.counted_since == first.taken_at  # counting began with the first snapshot, a baseline adding nothing
    assert state.calls_total == sums["calls"] >= 10 and state.exec_us_total == sums["exec_us"] > 0
    assert state.dealloc_total == sums["dealloc"]  # PostgreSQL 17 says its deallocations
    assert state.plan_us_total is None  # track_planning is off on the shared clusters: never counted, never 0
    assert seen[0].calls_total < seen[1].calls_total and seen[0].exec_us_total <= seen[1].exec_us_total


def test_running_totals_continue_across_baselines_and_count_only_what_was_read():
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    sums = np.zeros(len(TOTAL_NAMES), np.int64)
    sums[TOTAL_NAMES.index("calls")], sums[TOTAL_NAMES.index("exec_us")] = 5, 2_000
    sums[TOTAL_NAMES.index("plan_us")] = 300
    first = running_totals(None, t0, None, dealloc_delta=None, planning=True)
    assert first == {
        "counted_since": t0,
        "calls_total": 0,
        "exec_us_total": 0,
        "plan_us_total": None,
        "dealloc_total": None,
    }

    def state(totals: dict) -> ServerState:
        return ServerState(taken_at=t0, **totals)

    off = running_totals(state(first), t0 + timedelta(minutes=1), sums, dealloc_delta=None, planning=False)
    assert (off["calls_total"], off["exec_us_total"], off["plan_us_total"], off["dealloc_total"]) == (
        5,
        2000,
        None,
        None,
    )
    on = running_totals(state(off), t0 + timedelta(minutes=2), sums, dealloc_delta=4, planning=True)
    assert (on["calls_total"], on["plan_us_total"], on["dealloc_total"], on["counted_since"]) == (10, 300, 4, t0)
    again = running_totals(state(on), t0 + timedelta(minutes=3), None, dealloc_delta=None, planning=True)
    assert again == on  # a baseline (after a reset, a restart, another lineage) adds nothing and takes nothing
    # A state from before the totals existed (an upgrade): counting begins at this snapshot.
    later = t0 + timedelta(minutes=4)
    upgraded = running_totals(ServerState(taken_at=t0), later, sums, dealloc_delta=1, planning=False)
    assert upgraded["counted_since"] == later and upgraded["calls_total"] == 5
