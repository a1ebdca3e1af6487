"""The history's tiers (hourly and daily blocks) built by the real rollup over the synthetic history: every hour and
day of it, zero figures stored as null and read as zero, a day's totals the sum of its hours."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from history import tiers
from tests.history_world import raw_sums
from tests.readtier.synthetic import synthetic_history

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def history(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock(), synthetic_history("tiers-synthetic") as server:
        yield server


def test_the_tiers_were_built(history):
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM collectors_server_hourly WHERE server_id = %s", [history.pk])
        hours = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM collectors_server_daily WHERE server_id = %s", [history.pk])
        days = cur.fetchone()[0]
    assert hours == 56 - 3  # 21:00 on the 30th to 04:00 on the 2nd, less the 3 hours without a snapshot
    assert days == 4  # 30, 31 October, 1 and 2 November (rolled up a day later)


def test_zero_figures_are_stored_as_null_and_read_as_zero(history):
    """The statement tiers keep no zeros (a NULL takes no bytes); read back, NULL is 0 again."""
    with connection.cursor() as cur:
        for table in ("collectors_statement_hourly", "collectors_statement_daily"):
            cur.execute(
                f"SELECT count(*) FILTER (WHERE plan_us = 0 OR calls = 0 OR temp_blks = 0 OR wal_bytes = 0), "
                f"count(*) FILTER (WHERE plan_us IS NULL), count(*) FILTER (WHERE calls IS NOT NULL), count(*) "
                f"FROM {table} WHERE server_id = %s",
                [history.pk],
            )
            zeros, null_plan, with_calls, rows = cur.fetchone()
            assert rows > 0 and zeros == 0, table
            assert 0 < null_plan, table  # track_planning off: no planning time
            assert with_calls > 0, table
        cur.execute(
            "SELECT max(until) FROM collectors_statement_hourly WHERE server_id = %s AND plan_us IS NULL", [history.pk]
        )
        until = cur.fetchone()[0]
    sums = tiers.read_boundary(tiers.TABLES.STATEMENT_HOURLY, history.pk, until)
    plan_us = sums.values[:, tiers.TOTAL_NAMES.index("plan_us")]
    assert (plan_us == 0).any() and (plan_us >= 0).all()


def test_day_totals_equal_the_sum_of_their_hours(history):
    with connection.cursor() as cur:
        cur.execute(
            "SELECT d.calls, (SELECT sum(calls) FROM collectors_server_hourly h WHERE h.server_id = d.server_id "
            "AND h.bucket >= d.bucket AND h.bucket < d.bucket + interval '1 day') FROM collectors_server_daily d "
            "WHERE d.server_id = %s",
            [history.pk],
        )
        rows = cur.fetchall()
    assert rows and all(a == b for a, b in rows)
    month_end = tiers.read_boundary(tiers.TABLES.STATEMENT_DAILY, history.pk, datetime(2026, 11, 1, tzinfo=UTC))
    expected, _ = raw_sums(history.pk, datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
    got = dict(zip(month_end.statement_id.tolist(), month_end.values.tolist(), strict=True))
    assert {k: v for k, v in got.items() if any(v)} == {k: v.tolist() for k, v in expected.items()}
