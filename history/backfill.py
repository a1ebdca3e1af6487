"""Bring the history collected before the read tier into it, so nothing is lost: the server totals
of raw snapshots written without them, and the blob rollups of the first schema (kept as
collectors_statement_{hourly,daily}_legacy by migration 0004), which are dropped once converted."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from history import codec, rollups, tiers
from history.columns import TOTAL_NAMES
from history.tables import TABLES

log = logging.getLogger(__name__)
LEGACY_HOURLY = "collectors_statement_hourly_legacy"
LEGACY_DAILY = "collectors_statement_daily_legacy"


@dataclass
class BackfillResult:
    snapshots: int = 0  # raw snapshots given their totals
    legacy_hours: int = 0  # hours converted from blob rollups (their raw snapshots had expired)
    legacy_days: int = 0
    rollups: rollups.RollupResult = field(default_factory=rollups.RollupResult)
    dropped: list[str] = field(default_factory=list)


def _exists(name: str) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        return cur.fetchone()[0]


def pending() -> bool:
    """Is there history from before the read tier left to convert?"""
    return _exists(LEGACY_HOURLY) or _exists(LEGACY_DAILY)


def fill_snapshot_totals(batch: int = 500) -> int:
    """Totals columns of delta snapshots stored before they existed, from their blocks."""
    done = 0
    while True:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(
                f"SELECT server_id, taken_at, statements FROM {TABLES.SNAPSHOT.name} "
                "WHERE kind = 'delta' AND calls IS NULL AND statements IS NOT NULL LIMIT %s FOR UPDATE",
                [batch],
            )
            rows = cur.fetchall()
            for server_id, taken_at, payload in rows:
                sums = tiers.from_blocks([codec.decode(bytes(payload))]).values.sum(axis=0)
                values = [int(v) for v in sums] if sums.size else [0] * len(TOTAL_NAMES)
                cur.execute(
                    f"UPDATE {TABLES.SNAPSHOT.name} SET "
                    + ", ".join(f"{c} = %s" for c in TOTAL_NAMES)
                    + " WHERE server_id = %s AND taken_at = %s",
                    [*values, server_id, taken_at],
                )
        done += len(rows)
        if len(rows) < batch:
            return done


def _legacy_rows(table: str) -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT server_id, bucket, snapshots, span_s, planning_tracked_s, dealloc_delta, statements FROM {table} "
            "ORDER BY server_id, bucket"
        )
        return cur.fetchall()


def convert_legacy_hours() -> int:
    """Hours of the first schema's hourly blobs whose day has no raw snapshot left (days with raw
    snapshots are rebuilt from them by the rollup)."""
    by_day: dict[tuple[int, datetime], dict[datetime, tiers.HourRaw]] = defaultdict(dict)
    for server_id, bucket, snapshots, span_s, tracked_s, dd, payload in _legacy_rows(LEGACY_HOURLY):
        block = codec.decode(bytes(payload))
        by_day[(server_id, tiers.day_of(bucket))][bucket] = tiers.HourRaw(
            snapshots=snapshots,
            span_s=span_s,
            planning_tracked_s=tracked_s,
            dealloc_delta=dd,
            dealloc_span_s=span_s if dd is not None else 0.0,
            entries_peak=0,
            entries_max=None,
            changed=len(block),
            new_entries=0,
            sums=tiers.from_blocks([block]),
        )
    converted = 0
    for (server_id, day), hours in sorted(by_day.items()):
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(
                f"SELECT EXISTS (SELECT 1 FROM {TABLES.SNAPSHOT.name} WHERE server_id = %s AND taken_at >= %s "
                "AND taken_at < %s)",
                [server_id, day, day + tiers.DAY],
            )
            if cur.fetchone()[0]:
                continue
            converted += tiers.write_hours(server_id, day, day + tiers.DAY, hours)
    return converted


def convert_legacy_days(until: datetime) -> int:
    """Days of the first schema's daily blobs whose hours have expired, merged month by month with
    the days built from hours."""
    older: dict[tuple[int, datetime], dict[datetime, tuple[dict, tiers.Sums]]] = defaultdict(dict)
    waits: dict[int, dict[datetime, dict[str, float]]] = {}
    for server_id, bucket, snapshots, span_s, tracked_s, dd, payload in _legacy_rows(LEGACY_DAILY):
        if server_id not in waits:  # the daily wait rollups were kept as they were
            waits[server_id] = tiers.wait_event_sums(
                TABLES.WAIT_EVENT_DAILY, "bucket", server_id, datetime.min.replace(tzinfo=until.tzinfo), until, "day"
            )
        day_waits = waits[server_id].get(bucket, {})
        sums = tiers.from_blocks([codec.decode(bytes(payload))])
        values = sums.values.sum(axis=0) if len(sums) else [0] * len(TOTAL_NAMES)
        server = {
            "server_id": server_id,
            "bucket": bucket,
            "snapshots": snapshots,
            "span_s": span_s,
            "planning_tracked_s": tracked_s,
            **{c: int(v) for c, v in zip(TOTAL_NAMES, values, strict=True)},
            "dealloc_delta": dd,
            "dealloc_span_s": span_s if dd is not None else 0.0,
            "entries_peak": 0,
            "entries_max": None,
            "changed": len(sums),
            "new_entries": 0,
            "wait_session_s": sum(day_waits.values()),
            "waits": day_waits,
            "built_until": bucket + tiers.DAY,
        }
        older[(server_id, tiers.month_of(bucket))][bucket] = (server, sums)
    converted = 0
    for (server_id, month), days in sorted(older.items()):
        with transaction.atomic():
            tiers.rebuild_days(server_id, month, until, older=days)
        converted += len(days)
    return converted


def history_backfill(*, now: datetime | None = None, drop_legacy: bool = True) -> BackfillResult:
    """Everything the read tier needs from history stored before it; safe to run again."""
    now = now or timezone.now()
    result = BackfillResult(snapshots=fill_snapshot_totals())
    has_legacy = _exists(LEGACY_HOURLY) or _exists(LEGACY_DAILY)
    if _exists(LEGACY_HOURLY):
        result.legacy_hours = convert_legacy_hours()
    result.rollups = rollups.roll_up(now=now)  # hours from raw snapshots, then days from hours
    if _exists(LEGACY_DAILY):
        result.legacy_days = convert_legacy_days(until=now.replace(hour=0, minute=0, second=0, microsecond=0))
    if has_legacy and drop_legacy and not result.rollups.failed:
        with connection.cursor() as cur:
            for name in (LEGACY_HOURLY, LEGACY_DAILY):
                if _exists(name):
                    cur.execute(f'DROP TABLE "{name}"')  # its partitions go with it
                    result.dropped.append(name)
    return result
