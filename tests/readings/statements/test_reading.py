"""readings/statements/reading.py: the snapshot's frame (baseline or delta, its time and interval) and the facts the
statements reading gives it, step by step on a real server."""

import pytest

from readings import connection as monitored
from readings.errors import ClockWentBack
from readings.services import _load_previous
from readings.settings.reading import READING as SETTINGS
from readings.statements.reading import READING
from readings.unit import Snapshot
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)


def _read(server) -> Snapshot:
    snap = Snapshot(server=server, previous=_load_previous(server.pk))
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
