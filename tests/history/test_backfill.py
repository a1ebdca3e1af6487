"""History stored before the read tier is brought into it: raw snapshots without their totals,
and the first schema's blob rollups (whose raw snapshots have expired), then dropped."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from bench.baseline import merge
from history import codec
from history.backfill import LEGACY_DAILY, LEGACY_HOURLY, history_backfill, pending
from history.columns import TOTAL_NAMES
from history.tables import TABLES
from readtier import Page, Window, top_statements
from tests.history_world import build, figures, raw_sums

pytestmark = pytest.mark.django_db(transaction=True)

START = datetime(2026, 9, 29, 22, 4, tzinfo=UTC)
END = datetime(2026, 10, 2, 3, 0, tzinfo=UTC)
LEGACY_COLUMNS = (
    "server_id int8, bucket timestamptz, snapshots int4, span_s float8, planning_tracked_s float8, "
    "dealloc_delta int8, statements bytea NOT NULL, built_at timestamptz DEFAULT now()"
)


def _old_schema(server_id: int, raw_gone_before: datetime) -> None:
    """What the first schema left: hourly and daily blob rollups (merged raw blocks, as its rollup built
    them), snapshots without totals, raw snapshots expired before `raw_gone_before`, no read tier."""
    with connection.cursor() as cur:
        cur.execute(f"CREATE TABLE {LEGACY_HOURLY} ({LEGACY_COLUMNS})")
        cur.execute(f"CREATE TABLE {LEGACY_DAILY} ({LEGACY_COLUMNS})")
        for table, unit in ((LEGACY_HOURLY, "hour"), (LEGACY_DAILY, "day")):
            cur.execute(
                f"SELECT date_trunc('{unit}', taken_at), count(*), sum(interval_s), "
                "sum(CASE WHEN track_planning THEN interval_s ELSE 0 END), sum(dealloc_delta), "
                "array_agg(statements) FROM collectors_snapshot WHERE server_id = %s AND kind = 'delta' GROUP BY 1",
                [server_id],
            )
            for bucket, n, span, tracked, dd, payloads in cur.fetchall():
                merged = merge([codec.decode(bytes(p)) for p in payloads])
                cur.execute(
                    f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    [server_id, bucket, n, span, tracked, dd, codec.encode(merged)],
                )
        cur.execute(
            "UPDATE collectors_snapshot SET " + ", ".join(f"{c} = NULL" for c in TOTAL_NAMES) + " WHERE server_id = %s",
            [server_id],
        )
        cur.execute(
            "DELETE FROM collectors_snapshot WHERE server_id = %s AND taken_at < %s", [server_id, raw_gone_before]
        )
        for t in (TABLES.SERVER_HOURLY, TABLES.SERVER_DAILY, TABLES.STATEMENT_HOURLY, TABLES.STATEMENT_DAILY):
            cur.execute(f"DELETE FROM {t.name} WHERE server_id = %s", [server_id])


def test_backfill_brings_the_old_history_into_the_read_tier():
    server = build("backfilled", n=30, start=START, end=END, step=timedelta(minutes=15))
    windows = [
        Window(datetime(2026, 9, 29, 23, 0, tzinfo=UTC), datetime(2026, 10, 1, 5, 0, tzinfo=UTC)),
        Window(datetime(2026, 9, 30, 4, 0, tzinfo=UTC), datetime(2026, 9, 30, 11, 0, tzinfo=UTC)),
        Window(datetime(2026, 9, 29, 0, 0, tzinfo=UTC), datetime(2026, 10, 3, 0, 0, tzinfo=UTC)),
    ]
    truth = [raw_sums(server.pk, w.start, w.end)[0] for w in windows]
    with connection.cursor() as cur:
        cur.execute(
            "SELECT taken_at, calls FROM collectors_snapshot WHERE server_id = %s AND kind = 'delta' "
            "AND taken_at >= %s",
            [server.pk, datetime(2026, 10, 1, tzinfo=UTC)],
        )
        calls_before = dict(cur.fetchall())
    _old_schema(server.pk, raw_gone_before=datetime(2026, 10, 1, tzinfo=UTC))
    assert pending()

    result = history_backfill(now=END + timedelta(days=1))

    assert result.snapshots == len(calls_before) and result.legacy_hours > 0 and result.legacy_days > 0
    assert sorted(result.dropped) == sorted([LEGACY_HOURLY, LEGACY_DAILY]) and not pending()
    with connection.cursor() as cur:
        cur.execute(
            "SELECT taken_at, calls FROM collectors_snapshot WHERE server_id = %s AND kind = 'delta'", [server.pk]
        )
        assert dict(cur.fetchall()) == calls_before
    for window, expected in zip(windows, truth, strict=True):
        got = top_statements(server_id=server.pk, window=window, page=Page(1, 500))
        assert {r.statement_id: figures(r).tolist() for r in got.rows} == {k: v.tolist() for k, v in expected.items()}
    # Run again: nothing left to do.
    again = history_backfill(now=END + timedelta(days=1))
    assert (again.snapshots, again.legacy_hours, again.legacy_days, again.dropped) == (0, 0, 0, [])
