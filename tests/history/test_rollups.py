"""The periodic rollup: one bad bucket is reported and skipped, the others are built; a rebuild is
idempotent and follows late snapshots."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from console.services import server_delete
from history import rollups
from history.tables import TABLES
from tests.history_world import build

pytestmark = pytest.mark.django_db(transaction=True)

START = datetime(2026, 5, 4, 21, 2, tzinfo=UTC)
END = datetime(2026, 5, 5, 3, 0, tzinfo=UTC)


def _tier_rows(server_id: int) -> dict[str, int]:
    out = {}
    with connection.cursor() as cur:
        for t in (TABLES.SERVER_HOURLY, TABLES.STATEMENT_HOURLY, TABLES.SERVER_DAILY, TABLES.STATEMENT_DAILY):
            cur.execute(f"SELECT count(*) FROM {t.name} WHERE server_id = %s", [server_id])
            out[t.name] = cur.fetchone()[0]
    return out


def _forget_tiers(server_id: int) -> None:
    with connection.cursor() as cur:
        for t in (TABLES.SERVER_HOURLY, TABLES.STATEMENT_HOURLY, TABLES.SERVER_DAILY, TABLES.STATEMENT_DAILY):
            cur.execute(f"DELETE FROM {t.name} WHERE server_id = %s", [server_id])


def test_a_bad_bucket_is_reported_and_the_others_are_built():
    good = build("rollup-good", n=20, start=START, end=END, step=timedelta(minutes=10))
    bad = build("rollup-bad", n=20, start=START, end=END, step=timedelta(minutes=10), seed=5)
    built = _tier_rows(good.pk)
    assert all(built.values())
    _forget_tiers(good.pk)
    _forget_tiers(bad.pk)
    with connection.cursor() as cur:  # one block of the bad server's second day is unreadable
        cur.execute(
            "UPDATE collectors_snapshot SET statements = '\\x00ff'::bytea WHERE server_id = %s AND taken_at = "
            "(SELECT min(taken_at) FROM collectors_snapshot WHERE server_id = %s AND taken_at >= %s "
            "AND kind = 'delta')",
            [bad.pk, bad.pk, datetime(2026, 5, 5, 1, 0, tzinfo=UTC)],
        )
    result = rollups.roll_up(now=END + timedelta(days=1))
    assert len(result.failed) == 1 and result.failed[0].startswith(f"server {bad.pk}, hour 2026-05-05T01:00")
    assert _tier_rows(good.pk) == built  # untouched by the other server's bad bucket
    with connection.cursor() as cur:  # the bad server's hours before the bad one, and its first day, are built
        cur.execute("SELECT min(bucket), max(bucket) FROM collectors_server_hourly WHERE server_id = %s", [bad.pk])
        first, last = cur.fetchone()
        cur.execute(
            "SELECT array_agg(bucket ORDER BY bucket) FROM collectors_server_daily WHERE server_id = %s", [bad.pk]
        )
        days = cur.fetchone()[0]
    assert first == datetime(2026, 5, 4, 21, 0, tzinfo=UTC) and last == datetime(2026, 5, 5, 0, 0, tzinfo=UTC)
    assert days == [datetime(2026, 5, 4, tzinfo=UTC)]  # not the day with a hole
    again = rollups.roll_up(now=END + timedelta(days=1))
    assert len(again.failed) == 1  # retried at each run, still reported
    for server in (good, bad):
        server_delete(server=server)
