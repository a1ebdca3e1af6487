"""partitions: each history table's range partitions, named and bounded by their UTC day, month or year, created
once and ahead of time, remembered only once committed, and dropped whole once entirely past retention. Shown on
the test database inside each test's transaction, at dates in 2011 that no other test writes."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import connection, transaction

from history import partitions
from history.partitions import AHEAD, SPANS, drop_expired, ensure, ensure_ahead, forget_cache, partition_name
from history.tables import TABLES

pytestmark = pytest.mark.django_db
DAY, YEAR = TABLES.SNAPSHOT.name, TABLES.SERVER_DAILY.name


class Rollback(Exception):
    pass


def bounds(name: str) -> str | None:
    """The partition's bounds as PostgreSQL prints them, or None when it does not exist."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = %s", [name])
        row = cur.fetchone()
    return row and row[0]


def printed(start: datetime, end: datetime) -> str:
    with connection.cursor() as cur:
        cur.execute("SELECT format('FOR VALUES FROM (%%L) TO (%%L)', %s::timestamptz, %s::timestamptz)", [start, end])
        return cur.fetchone()[0]


def test_a_partition_is_named_and_bounded_by_its_utc_span():
    at = datetime(2011, 3, 1, 1, 30, tzinfo=timezone(timedelta(hours=2)))  # still February 28th in UTC
    for table, (start, end) in {
        DAY: (datetime(2011, 2, 28, tzinfo=UTC), datetime(2011, 3, 1, tzinfo=UTC)),
        YEAR: (datetime(2011, 1, 1, tzinfo=UTC), datetime(2012, 1, 1, tzinfo=UTC)),
    }.items():
        name = partition_name(table, at)
        assert name == f"{table}_p{start.strftime({'day': '%Y%m%d', 'year': '%Y'}[SPANS[table][0]])}"
        ensure(table, at)
        ensure(table, start)  # the same partition again: nothing to do, no error
        assert bounds(name) == printed(start, end)


@pytest.mark.parametrize(
    "span, at, start, end",
    [
        ("day", datetime(2012, 2, 28, 23, 59), datetime(2012, 2, 28), datetime(2012, 2, 29)),
        ("month", datetime(2012, 2, 29, 12), datetime(2012, 2, 1), datetime(2012, 3, 1)),
        ("month", datetime(2011, 12, 31, 23), datetime(2011, 12, 1), datetime(2012, 1, 1)),
        ("year", datetime(2011, 12, 31, 23), datetime(2011, 1, 1), datetime(2012, 1, 1)),
    ],
)
def test_each_span_starts_at_its_floor_and_ends_where_the_next_begins(span, at, start, end):
    start, end = start.replace(tzinfo=UTC), end.replace(tzinfo=UTC)
    assert partitions._floor(at.replace(tzinfo=UTC), span) == start
    assert partitions._next(start, span) == end


def test_a_partition_created_in_a_rolled_back_transaction_is_created_again():
    at = datetime(2011, 4, 10, 12, tzinfo=UTC)
    name = partition_name(DAY, at)
    with pytest.raises(Rollback), transaction.atomic():
        ensure(DAY, at)
        assert bounds(name)
        raise Rollback
    assert bounds(name) is None
    ensure(DAY, at)
    assert bounds(name)


def test_ensure_ahead_makes_each_tables_partitions_from_now_on_and_remembers_them_once_committed(
    django_capture_on_commit_callbacks,
):
    now = datetime(2011, 6, 15, 9, tzinfo=UTC)
    spans = {"day": timedelta(days=1), "year": None}
    expected = []
    for table, (span, _) in SPANS.items():
        for k in range(AHEAD[span] + 1):
            at = now + spans[span] * k if spans[span] else now.replace(year=now.year + k)
            expected.append(partition_name(table, at))
    try:
        with django_capture_on_commit_callbacks(execute=True):
            assert sorted(ensure_ahead(now)) == sorted(expected)
        assert all(bounds(name) for name in expected)
        assert ensure_ahead(now) == []  # known since their commit
        forget_cache()
        assert sorted(ensure_ahead(now)) == sorted(expected)  # asked of the database again (and there already)
    finally:
        forget_cache()  # the test's transaction takes them away: this process must not think they exist


def test_only_partitions_entirely_past_retention_are_dropped(settings):
    settings.HISTORY = {**settings.HISTORY, "RAW_RETENTION_DAYS": 3}
    now = datetime(2011, 8, 20, tzinfo=UTC)  # the cutoff: August 17th, 00:00
    for day in (15, 16, 17):
        ensure(DAY, datetime(2011, 8, day, 12, tzinfo=UTC))
    dropped = drop_expired(now)
    gone = [partition_name(DAY, datetime(2011, 8, day, tzinfo=UTC)) for day in (15, 16)]
    assert set(gone) <= set(dropped) and all(bounds(name) is None for name in gone)
    assert bounds(partition_name(DAY, datetime(2011, 8, 17, tzinfo=UTC)))  # ends after the cutoff: kept
