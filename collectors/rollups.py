"""Hourly and daily rollups of the raw history, rebuilt idempotently: a bucket is (re)built whenever
the number of intervals behind it differs from what the stored rollup was built from."""
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from collectors import codec, partitions

LEVELS = (
    # name, bucket unit, source statements table, source time column, source wait table
    ("hourly", "hour", "collectors_snapshot", "taken_at", "collectors_wait_event"),
    ("daily", "day", "collectors_statement_hourly", "bucket", "collectors_wait_event_hourly"),
)


def _stale_buckets(level: str, unit: str, source: str, time_col: str, since: datetime, until: datetime) -> list:
    count = "count(*)" if source == "collectors_snapshot" else "sum(snapshots)"
    kind = "AND kind = 'delta'" if source == "collectors_snapshot" else ""
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT src.server_id, src.bucket FROM (
                SELECT server_id, date_trunc('{unit}', {time_col}) AS bucket, {count} AS n
                FROM {source} WHERE {time_col} >= %s AND {time_col} < %s {kind} GROUP BY 1, 2
            ) src LEFT JOIN collectors_statement_{level} r ON r.server_id = src.server_id AND r.bucket = src.bucket
            WHERE r.snapshots IS DISTINCT FROM src.n ORDER BY 2, 1
            """,
            [since, until],
        )
        return cur.fetchall()


def build_bucket(level: str, server_id: int, bucket: datetime) -> None:
    _, unit, source, time_col, wait_source = next(lv for lv in LEVELS if lv[0] == level)
    size = timedelta(hours=1) if unit == "hour" else timedelta(days=1)
    target = f"collectors_statement_{level}"
    partitions.ensure(target, bucket)
    partitions.ensure(f"collectors_wait_event_{level}", bucket)
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{target}:{server_id}:{bucket.isoformat()}"])
        if source == "collectors_snapshot":
            cur.execute(
                "SELECT 1, interval_s, CASE WHEN track_planning THEN interval_s ELSE 0 END, dealloc_delta, "
                "statements FROM collectors_snapshot WHERE server_id = %s AND taken_at >= %s AND taken_at < %s "
                "AND kind = 'delta'",
                [server_id, bucket, bucket + size],
            )
        else:
            cur.execute(
                f"SELECT snapshots, span_s, planning_tracked_s, dealloc_delta, statements FROM {source} "
                "WHERE server_id = %s AND bucket >= %s AND bucket < %s",
                [server_id, bucket, bucket + size],
            )
        rows = cur.fetchall()
        blocks = [codec.decode(bytes(r[4])) for r in rows if r[4] is not None]
        dealloc = [r[3] for r in rows if r[3] is not None]
        cur.execute(
            f"INSERT INTO {target} (server_id, bucket, snapshots, span_s, planning_tracked_s, dealloc_delta, "
            "statements, built_at) VALUES (%s, %s, %s, %s, %s, %s, %s, now()) "
            "ON CONFLICT (server_id, bucket) DO UPDATE SET snapshots = EXCLUDED.snapshots, span_s = EXCLUDED.span_s, "
            "planning_tracked_s = EXCLUDED.planning_tracked_s, dealloc_delta = EXCLUDED.dealloc_delta, "
            "statements = EXCLUDED.statements, built_at = now()",
            [
                server_id,
                bucket,
                sum(r[0] for r in rows),
                sum(r[1] for r in rows),
                sum(r[2] for r in rows),
                sum(dealloc) if dealloc else None,
                codec.encode(codec.merge(blocks)),
            ],
        )
        wait_target = f"collectors_wait_event_{level}"
        wait_time = "taken_at" if wait_source == "collectors_wait_event" else "bucket"
        cur.execute(f"DELETE FROM {wait_target} WHERE server_id = %s AND bucket = %s", [server_id, bucket])
        cur.execute(
            f"INSERT INTO {wait_target} (server_id, bucket, event_type, event, query_id, samples, session_s) "
            f"SELECT server_id, %s, event_type, event, query_id, sum(samples), sum(session_s) FROM {wait_source} "
            f"WHERE server_id = %s AND {wait_time} >= %s AND {wait_time} < %s GROUP BY 1, 3, 4, 5",
            [bucket, server_id, bucket, bucket + size],
        )


def roll_up(now: datetime | None = None) -> dict[str, int]:
    """Build every complete hour and day whose rollup is missing or stale. Safe to run concurrently
    with itself (each bucket is rebuilt whole in one transaction) and to run again."""
    now = now or timezone.now()
    built = {}
    for level, unit, source, time_col, _ in LEVELS:
        size = timedelta(hours=1) if unit == "hour" else timedelta(days=1)
        until = now.replace(minute=0, second=0, microsecond=0)
        if unit == "day":
            until = until.replace(hour=0)
        retention = settings.HISTORY["RAW_RETENTION_DAYS" if unit == "hour" else "HOURLY_RETENTION_DAYS"]
        since = until - timedelta(days=retention) - size
        stale = _stale_buckets(level, unit, source, time_col, since, until)
        for server_id, bucket in stale:
            build_bucket(level, server_id, bucket)
        built[level] = len(stale)
    return built
