"""Dispatching, rollups, retention and the history store going away, on real databases."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

import readtier as selectors
from collectors.errors import HistoryUnavailable
from collectors.scheduling import phase_s, servers_dispatch_due
from history import partitions, rollups, tables
from inventory.models import Server
from tests.world import collect, register, run, server_entry

pytestmark = pytest.mark.django_db(transaction=True)


def test_dispatch_claims_each_due_server_once(pg_clusters):
    a = register(pg_clusters[14], name="a")
    b = register(pg_clusters[14], name="b")
    Server.objects.filter(pk=b.pk).update(enabled=False)
    enqueued = []
    now = timezone.now()
    assert servers_dispatch_due(enqueue=lambda *args: enqueued.append(args), now=now) == [a.pk]
    # A second dispatcher at the same moment finds nothing due: no double collection.
    assert servers_dispatch_due(enqueue=lambda *args: enqueued.append(args), now=now) == []
    assert enqueued == [(a.pk, 60, 0.0)]  # new: at once
    a.refresh_from_db()
    # Collected at once, then on its phase: within the next interval, at its own second of the minute.
    first = a.next_collect_at
    assert now < first <= now + timedelta(seconds=60)
    # (compared around the circle: a phase near 0 s may come back as 59.9999... s)
    off = ((first - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() - phase_s(a.pk, 60)) % 60
    assert min(off, 60 - off) < 1e-3
    # Due again on the same cadence, one interval later, even when claimed a few seconds late (a beat tick).
    assert servers_dispatch_due(enqueue=lambda *_: None, now=first + timedelta(seconds=4)) == [a.pk]
    a.refresh_from_db()
    assert a.next_collect_at == first + timedelta(seconds=60)
    # Due before the next tick: sent now, to run at its due time (no tick of lag).
    enqueued.clear()
    ahead = a.next_collect_at - timedelta(seconds=3)
    assert servers_dispatch_due(enqueue=lambda *args: enqueued.append(args), now=ahead, horizon_s=5) == [a.pk]
    assert enqueued == [(a.pk, 63.0, 3.0)]
    a.refresh_from_db()
    assert a.next_collect_at == first + timedelta(seconds=120)
    first += timedelta(seconds=60)
    # A dispatcher back after three missed intervals enqueues once and keeps the phase.
    assert servers_dispatch_due(enqueue=lambda *_: None, now=first + timedelta(seconds=250)) == [a.pk]
    a.refresh_from_db()
    assert a.next_collect_at == first + timedelta(seconds=300)


def test_servers_registered_together_are_spread_over_the_interval():
    """A thousand servers added at once are not all due in the same second of every minute."""
    phases = sorted(phase_s(server_id, 60) for server_id in range(1, 1001))
    assert all(0 <= p < 60 for p in phases)
    per_second = [sum(1 for p in phases if s <= p < s + 1) for s in range(60)]
    assert max(per_second) <= 20, per_second  # an even spread is 16.7 a second
    assert phase_s(7, 300) == phase_s(7, 300) and phase_s(7, 300) != phase_s(8, 300)


def test_rollups_equal_the_raw_sums_and_are_idempotent(pg_clusters):
    c = pg_clusters[14]
    server = register(c, name="rolled")
    collect(server)
    run(c, "SELECT count(*) FROM pg_namespace", 3)
    collect(server)
    run(c, "SELECT count(*) FROM pg_namespace", 2)
    collect(server)
    now = timezone.now()
    page = selectors.Page(1, 500)
    raw = selectors.top_statements(
        server_id=server.pk, window=selectors.Window(now - timedelta(hours=1), now), page=page
    )
    assert raw.resolutions == ("raw",) and raw.intervals == 2
    queryid = server_entry(c, "SELECT count(*) FROM pg_namespace%")["queryid"]
    assert next(r for r in raw.rows if r.queryid == queryid).calls == 5
    future = now + timedelta(days=2)
    first = rollups.roll_up(now=future)
    assert first.hours >= 1 and first.days >= 1 and not first.failed
    again = rollups.roll_up(now=future)
    assert (again.hours, again.days, again.failed) == (0, 0, [])
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    tiers = selectors.top_statements(
        server_id=server.pk, window=selectors.Window(day - timedelta(days=1), day + timedelta(days=1)), page=page
    )
    assert "hourly" in tiers.resolutions or "daily" in tiers.resolutions
    assert [(r.statement_id, r.calls, r.exec_ms, r.rows) for r in tiers.rows] == [
        (r.statement_id, r.calls, r.exec_ms, r.rows) for r in raw.rows
    ]
    assert tiers.intervals == raw.intervals == 2


def test_retention_drops_whole_old_partitions(settings):
    settings.HISTORY = {**settings.HISTORY, "RAW_RETENTION_DAYS": 3}
    old = datetime(2020, 1, 5, tzinfo=UTC)
    partitions.ensure("collectors_snapshot", old)
    name = partitions.partition_name("collectors_snapshot", old)
    with connection.cursor() as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        assert cur.fetchone()[0]
    assert name in partitions.drop_expired()
    created = partitions.ensure_ahead()
    with connection.cursor() as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        assert not cur.fetchone()[0]
        tomorrow = partitions.partition_name("collectors_snapshot", timezone.now() + timedelta(days=1))
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [tomorrow])
        assert cur.fetchone()[0]
    assert isinstance(created, list)


def test_retention_applies_to_every_tier(settings):
    """Each partitioned history table drops what is older than its own retention, and keeps the rest."""
    settings.HISTORY = {"RAW_RETENTION_DAYS": 3, "HOURLY_RETENTION_DAYS": 60, "DAILY_RETENTION_DAYS": 730}
    now = timezone.now()
    for t in tables.PARTITIONED:
        days = settings.HISTORY[t.retention]
        expired = now - timedelta(days=days + 400)
        kept = now - timedelta(days=max(days - 40, 1))
        partitions.ensure(t.name, expired)
        partitions.ensure(t.name, kept)
    dropped = partitions.drop_expired(now)
    for t in tables.PARTITIONED:
        days = settings.HISTORY[t.retention]
        assert partitions.partition_name(t.name, now - timedelta(days=days + 400)) in dropped, t.name
        assert partitions.partition_name(t.name, now - timedelta(days=max(days - 40, 1))) not in dropped, t.name


def test_history_store_unavailable_raises_for_retry_and_stores_nothing(pg_clusters, settings):
    """The collection task retries (with backoff) on HistoryUnavailable; nothing partial is kept."""
    server = register(pg_clusters[13], name="histdown")
    db = settings.DATABASES["default"]
    original = db["PORT"]
    connection.close()
    db["PORT"] = "1"  # the history store is unreachable
    connection.settings_dict["PORT"] = "1"
    try:
        with pytest.raises(HistoryUnavailable):
            from collectors.services import server_collect

            server_collect(server_id=server.pk)
    finally:
        connection.close()
        db["PORT"] = original
        connection.settings_dict["PORT"] = original
    result = collect(server)  # the retry, once the store is back
    assert result.kind == "baseline"


def test_a_task_for_a_removed_server_is_dropped_quietly():
    from collectors.services import server_collect

    result = server_collect(server_id=987654321)
    assert (result.ok, result.kind, result.error_code) == (False, "gone", "gone")
