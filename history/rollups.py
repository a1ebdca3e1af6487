"""Periodic rollups of the raw history into the read tier (history/tiers.py) and the wait-event
rollups. A UTC hour is (re)built whenever the number of snapshots behind it differs from what its
bucket was built from (the current hour too, as it goes), a whole UTC day likewise from its hours;
each rebuild runs in its own transaction, so one bad bucket is logged and skipped without stopping
the others, and runs again next time."""

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from history import partitions, tables, tiers
from history.tables import TABLES

log = logging.getLogger(__name__)


@dataclass
class RollupResult:
    hours: int = 0  # hour buckets written
    days: int = 0
    failed: list[str] = field(default_factory=list)  # "server 3, hour 2026-11-23 10:00: error" per failed rebuild


def _stale(source_sql: str, built: tables.HistoryTable, unit: str, since: datetime, until: datetime) -> list:
    """(server_id, first stale bucket of its day or month) for buckets whose source count differs."""
    group = "day" if unit == "hour" else "month"
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT src.server_id, min(src.bucket) FROM ({source_sql}) src
            LEFT JOIN {built.name} b ON b.server_id = src.server_id AND b.bucket = src.bucket
            WHERE b.snapshots IS DISTINCT FROM src.n
            GROUP BY src.server_id, date_trunc('{group}', src.bucket) ORDER BY 2, 1
            """,
            [since, until],
        )
        return cur.fetchall()


def _waits(level: str, server_id: int, start: datetime, end: datetime) -> None:
    """Rebuild the wait-event rollup rows of one server over [start, end)."""
    unit, target, source, time_col = {
        "hourly": ("hour", TABLES.WAIT_EVENT_HOURLY, TABLES.WAIT_EVENT, "taken_at"),
        "daily": ("day", TABLES.WAIT_EVENT_DAILY, TABLES.WAIT_EVENT_HOURLY, "bucket"),
    }[level]
    partitions.ensure(target.name, start)
    with connection.cursor() as cur:
        cur.execute(
            f"DELETE FROM {target.name} WHERE server_id = %s AND bucket >= %s AND bucket < %s", [server_id, start, end]
        )
        cur.execute(
            f"INSERT INTO {target.name} (server_id, bucket, event_type, event, query_id, samples, session_s) "
            f"SELECT server_id, date_trunc('{unit}', {time_col}), event_type, event, query_id, sum(samples), "
            f"sum(session_s) FROM {source.name} WHERE server_id = %s AND {time_col} >= %s AND {time_col} < %s "
            "GROUP BY 1, 2, 3, 4, 5",
            [server_id, start, end],
        )


# The tier tables each rebuild writes. Their partitions are made before its transaction: creating one takes an
# exclusive lock on its parent, and a rebuild that had read the parent (its latest boundary) and then waited for
# the partition's creator deadlocked with it (a creator waits for the parent while holding the partition's
# advisory lock).
_WRITES = {
    "hourly": (TABLES.WAIT_EVENT_HOURLY, TABLES.STATEMENT_HOURLY, TABLES.SERVER_HOURLY),
    "daily": (TABLES.WAIT_EVENT_DAILY, TABLES.STATEMENT_DAILY, TABLES.SERVER_DAILY),
}


def _partitions(level: str, *at: datetime) -> None:
    for table in _WRITES[level]:
        for moment in at:
            partitions.ensure(table.name, moment)


def rebuild_hours(server_id: int, from_hour: datetime, until: datetime) -> int:
    """Hours of from_hour's day, from it on: read tier and wait rollups, in one transaction. An hour that
    cannot be built raises tiers.BucketFailed once the hours before it are committed."""
    day = tiers.day_of(from_hour)
    end = min(day + tiers.DAY, until)
    _partitions("hourly", from_hour, day + tiers.DAY)  # the day's last boundary is the next day's midnight
    failed = None
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"rollup-hours:{server_id}:{day.isoformat()}"])
        _waits("hourly", server_id, from_hour, end)  # first: the hours' wait totals are read from it
        try:
            written = tiers.rebuild_hours(server_id, from_hour, end)
        except tiers.BucketFailed as exc:
            failed = exc
    if failed is not None:
        raise failed
    return written


def rebuild_days(server_id: int, from_day: datetime, until: datetime) -> int:
    month = tiers.month_of(from_day)
    end = min(tiers.next_month(month), until)
    _partitions("daily", from_day, tiers.next_month(month))
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"rollup-days:{server_id}:{month.isoformat()}"])
        _waits("daily", server_id, from_day, end)
        written = tiers.rebuild_days(server_id, from_day, end)
    return written


def roll_up(now: datetime | None = None) -> RollupResult:
    """Build every complete hour and day whose rollup is missing or stale. Safe to run concurrently
    with itself (a day's hours, or a month's days, are rebuilt whole under one lock) and again."""
    now = now or timezone.now()
    result = RollupResult()
    hour_until = now  # the current hour too, as far as it goes (its bucket says how far)
    day_until = now.replace(hour=0, minute=0, second=0, microsecond=0)
    raw_since = day_until - timedelta(days=settings.HISTORY["RAW_RETENTION_DAYS"] + 1)
    hourly_since = day_until - timedelta(days=settings.HISTORY["HOURLY_RETENTION_DAYS"] + 1)

    raw_counts = (
        f"SELECT server_id, date_trunc('hour', taken_at) AS bucket, count(*) AS n FROM {TABLES.SNAPSHOT.name} "
        "WHERE taken_at >= %s AND taken_at < %s AND kind = 'delta' GROUP BY 1, 2"
    )
    incomplete: set[tuple[int, datetime]] = set()  # (server, day) with an hour that could not be built
    for server_id, first in _stale(raw_counts, TABLES.SERVER_HOURLY, "hour", raw_since, hour_until):
        try:
            result.hours += rebuild_hours(server_id, first, hour_until)
        except tiers.BucketFailed as exc:
            result.hours += exc.written
            log.error("rollup of server %s failed at %s (retried next run)", server_id, exc)
            result.failed.append(f"server {server_id}, {exc}")
            incomplete.add((server_id, tiers.day_of(exc.hour)))
        except Exception as exc:  # one bad bucket must not stop the others; it is retried next run
            log.exception("rollup of server %s from hour %s failed", server_id, first)
            result.failed.append(f"server {server_id}, hours from {first.isoformat()}: {type(exc).__name__}: {exc}")
            incomplete.add((server_id, tiers.day_of(first)))

    hour_counts = (
        f"SELECT server_id, date_trunc('day', bucket) AS bucket, sum(snapshots) AS n FROM {TABLES.SERVER_HOURLY.name} "
        "WHERE bucket >= %s AND bucket < %s GROUP BY 1, 2"
    )
    for server_id, first in _stale(hour_counts, TABLES.SERVER_DAILY, "day", hourly_since, day_until):
        # A day whose hours are not all built is not summed up, nor the days after it (running sums):
        # they are retried with its hours.
        until = min([day_until, *(day for sid, day in incomplete if sid == server_id and day >= first)])
        if until <= first:
            continue
        try:
            result.days += rebuild_days(server_id, first, until)
        except Exception as exc:
            log.exception("rollup of server %s from day %s failed", server_id, first)
            result.failed.append(f"server {server_id}, days from {first.isoformat()}: {type(exc).__name__}: {exc}")
    return result
