"""The history store's beat tasks, called as a worker calls them (the texts redacted again: the collectors',
tests/collectors/test_tasks.py). The partitions are kept ahead, and the rollups run until nothing is stale.
(Through a real worker and beat: tests/production/test_beat_flows.py.)"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

import pytest
from django.db import connection

from history import partitions, rollups
from history.tables import TABLES
from history.tasks import maintain_partitions, roll_up_history
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db


def test_maintain_partitions_creates_todays_and_the_next_ones_and_prunes(pg_clusters):
    partitions.forget_cache()  # as a worker that just started: every partition ahead is looked at (and created
    # if missing; those it creates are remembered once committed, which this test's transaction never is)
    out = maintain_partitions()
    assert set(out) == {"created", "dropped", "pruned", "busy", "plan_spend_pruned"}
    today = partitions.partition_name(TABLES.SNAPSHOT.name, datetime.now(UTC))
    assert today in out["created"]
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_class WHERE relname = %s", [today])
        assert cur.fetchone() is not None


def test_roll_up_history_rolls_what_is_stale_once(pg_clusters):
    c = pg_clusters[15]
    server = register(c)
    collect(server)
    run(c, "SELECT 'roll-up' /* tasks */")
    collect(server)
    first = roll_up_history()
    assert set(first) == {f.name for f in fields(rollups.RollupResult)} and first["failed"] == []
    assert roll_up_history() == {"hours": 0, "days": 0, "failed": []}  # nothing stale any more
