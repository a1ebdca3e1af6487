"""Native range partitions of the history tables: created ahead, dropped whole for retention."""

import re
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from history import tables

# table name -> (partition span, retention setting)
SPANS: dict[str, tuple[str, str]] = {t.name: (t.span, t.retention) for t in tables.PARTITIONED}
AHEAD = {"day": 3, "month": 2, "year": 1}
_SUFFIX = {"day": "%Y%m%d", "month": "%Y%m", "year": "%Y"}
_known: set[str] = set()


def _floor(at: datetime, span: str) -> datetime:
    at = at.astimezone(UTC)
    if span == "day":
        return at.replace(hour=0, minute=0, second=0, microsecond=0)
    if span == "month":
        return at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return at.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)


def _next(start: datetime, span: str) -> datetime:
    if span == "day":
        return start + timedelta(days=1)
    if span == "month":
        return (start + timedelta(days=32)).replace(day=1)
    return start.replace(year=start.year + 1)


def partition_name(table: str, at: datetime) -> str:
    span = SPANS[table][0]
    return f"{table}_p{_floor(at, span).strftime(_SUFFIX[span])}"


def ensure(table: str, at: datetime) -> None:
    """Create the partition of `table` that holds `at`, if missing (safe to race)."""
    name = partition_name(table, at)
    if name in _known:
        return
    span = SPANS[table][0]
    start = _floor(at, span)
    end = _next(start, span)
    with transaction.atomic(), connection.cursor() as cur:
        # Serialise creators: two workers creating the same partition would otherwise collide.
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        if not cur.fetchone()[0]:
            cur.execute(
                f'CREATE TABLE "{name}" PARTITION OF "{table}" FOR VALUES FROM (%s) TO (%s)',
                [start, end],
            )
    # Known only once committed: created inside a transaction that rolls back, it is gone again.
    transaction.on_commit(lambda: _known.add(name))


def ensure_ahead(now: datetime | None = None) -> list[str]:
    now = now or datetime.now(UTC)
    created = []
    for table, (span, _) in SPANS.items():
        at = _floor(now, span)
        for _ in range(AHEAD[span] + 1):
            name = partition_name(table, at)
            if name not in _known:
                ensure(table, at)
                created.append(name)
            at = _next(at, span)
    return created


def drop_expired(now: datetime | None = None) -> list[str]:
    """Drop partitions whose whole range is older than the table's retention."""
    now = now or datetime.now(UTC)
    dropped = []
    with connection.cursor() as cur:
        for table, (span, setting) in SPANS.items():
            cutoff = now - timedelta(days=settings.HISTORY[setting])
            cur.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s",
                [table],
            )
            for (name,) in cur.fetchall():
                m = re.fullmatch(rf"{table}_p(\d+)", name)
                if not m:
                    continue
                start = datetime.strptime(m.group(1), _SUFFIX[span]).replace(tzinfo=UTC)
                if _next(start, span) <= cutoff:
                    with transaction.atomic():
                        cur.execute("SET LOCAL lock_timeout = '5s'")
                        cur.execute(f'DROP TABLE "{name}"')
                    _known.discard(name)
                    dropped.append(name)
    return dropped


def forget_cache() -> None:
    _known.clear()
