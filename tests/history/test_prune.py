"""The statement dimension pruned of statements nothing refers to any more, on a real server: a statement
that left pg_stat_statements says when (gone_at, set by the snapshot that saw it go), and once it has been
gone longer than raw retention it is deleted unless a tier still holds its activity."""

from datetime import timedelta

import pytest
from django.conf import settings

from history import prune, rollups
from history.models import Statement
from tests.world import APP_DB, collect, register, run, server_entry

pytestmark = pytest.mark.django_db(transaction=True)


def test_statements_gone_long_enough_and_in_no_tier_are_pruned(pg_clusters):
    c = pg_clusters[17]
    run(c, "DROP TABLE IF EXISTS prune_items; CREATE TABLE prune_items (id int)")
    run(c, "SELECT count(*) FROM prune_items WHERE id < 0")  # idle: seen at the baseline only, never booked
    server = register(c, name="pruned")
    collect(server)
    run(c, "SELECT max(id) FROM prune_items", 3)  # active: booked, then rolled into the tiers
    booked = collect(server)
    rolled = rollups.roll_up(now=booked.taken_at + timedelta(days=2))
    assert not rolled.failed and rolled.hours >= 1

    idle = server_entry(c, "SELECT count(*) FROM prune_items%")["queryid"]
    active = server_entry(c, "SELECT max(id) FROM prune_items%")["queryid"]
    for queryid in (idle, active):
        c.execute(f"SELECT pg_stat_statements_reset(0, 0, {queryid})", dbname=APP_DB)
    gone = collect(server)
    assert gone.gone_entries >= 2
    by_queryid = {s.queryid: s for s in Statement.objects.filter(server=server)}
    assert by_queryid[idle].gone_at == by_queryid[active].gone_at == gone.taken_at
    present = [s.pk for s in by_queryid.values() if s.gone_at is None]
    assert present, "statements still in pg_stat_statements have no gone_at"

    # Gone for less than raw retention (+ a day): nothing is pruned, the raw blocks may still hold them.
    assert prune.statements_prune(now=gone.taken_at + timedelta(hours=1)) == {
        "pruned": 0,
        "busy": 0,
        "plan_spend_pruned": 0,
    }
    later = gone.taken_at + timedelta(days=settings.HISTORY["RAW_RETENTION_DAYS"] + 2)
    outcome = prune.statements_prune(now=later)
    left = set(Statement.objects.filter(server=server).values_list("queryid", flat=True))
    assert idle not in left, "gone long enough, in no tier: pruned"
    assert active in left, "its hours and days are still in the tiers"
    assert set(present) <= set(Statement.objects.filter(server=server).values_list("pk", flat=True))
    assert outcome["pruned"] >= 1 and outcome["busy"] == 0
    # The idle statement comes back: a new dimension row, counted from then on.
    run(c, "SELECT count(*) FROM prune_items WHERE id < 0", 2)
    collect(server)
    back = Statement.objects.get(server=server, queryid=idle)
    assert back.gone_at is None and back.pk != by_queryid[idle].pk
