"""The read path before the read tier (readtier.py at commit 5b72573), as the same-run
baseline of the read-tier benchmark: ``statement_totals`` decodes every raw block in the window and
every hourly and daily rollup blob whose bucket lies wholly inside it, merges them in Python
(merge), and ``top_statements`` sorts the merged block and looks the top rows up in the
statement dimension. The algorithm is copied unchanged; only the rollup tables are the benchmark's
own (bench_old_hourly, bench_old_daily: one encoded block per server and hour or day, as the blob
rollups of migration 0002 were), built here from the same snapshots the new tier is built from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from django.db import connection

from history import codec
from history.columns import COUNTER_NAMES, FACT_GAUGE_NAMES
from history.models import Statement
from history.tables import TABLES

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
HOURLY_FROM = timedelta(hours=6)
DAILY_FROM = timedelta(days=14)
C = {name: i for i, name in enumerate(COUNTER_NAMES)}
G = {name: i for i, name in enumerate(FACT_GAUGE_NAMES)}
HOURLY, DAILY = "bench_old_hourly", "bench_old_daily"


def create_tables() -> None:
    with connection.cursor() as cur:
        for name in (HOURLY, DAILY):
            cur.execute(f"DROP TABLE IF EXISTS {name}")
            cur.execute(
                f"CREATE TABLE {name} (server_id int8 NOT NULL, bucket timestamptz NOT NULL, "
                "snapshots int4 NOT NULL, span_s float8 NOT NULL, planning_tracked_s float8 NOT NULL, "
                "dealloc_delta int8, statements bytea NOT NULL, built_at timestamptz NOT NULL DEFAULT now(), "
                "PRIMARY KEY (server_id, bucket))"
            )


def drop_tables() -> None:
    with connection.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {HOURLY}, {DAILY}")


def _insert(table: str, server_id: int, bucket: datetime, snapshots: int, span_s: float, block: codec.Block) -> None:
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {table} (server_id, bucket, snapshots, span_s, planning_tracked_s, dealloc_delta, "
            "statements) VALUES (%s, %s, %s, %s, 0, 0, %s) ON CONFLICT (server_id, bucket) DO UPDATE SET "
            "snapshots = EXCLUDED.snapshots, span_s = EXCLUDED.span_s, statements = EXCLUDED.statements",
            [server_id, bucket, snapshots, span_s, codec.encode(block)],
        )


def record_hour(server_id: int, hour: datetime, blocks: list[codec.Block], span_s: float) -> None:
    """The old hourly rollup of one hour, from its snapshots' blocks (as rollups.build_bucket merged them)."""
    _insert(HOURLY, server_id, hour, len(blocks), span_s, merge(blocks))


def hours_from_raw(server_id: int, start: datetime, end: datetime) -> int:
    """Old hourly rollups of the whole hours in [start, end) from the raw snapshots still stored."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT date_trunc('hour', taken_at), interval_s, statements FROM {TABLES.SNAPSHOT.name} "
            "WHERE server_id = %s AND taken_at >= %s AND taken_at < %s AND kind = 'delta' ORDER BY taken_at",
            [server_id, start, end],
        )
        rows = cur.fetchall()
    by_hour: dict[datetime, list] = {}
    for hour, interval_s, payload in rows:
        by_hour.setdefault(hour, []).append((interval_s, payload))
    for hour, items in by_hour.items():
        blocks = [codec.decode(bytes(p)) for _, p in items if p is not None]
        _insert(HOURLY, server_id, hour, len(items), sum(i for i, _ in items), merge(blocks))
    return len(by_hour)


def days_from_hours(server_id: int, start: datetime, end: datetime) -> int:
    """Old daily rollups of the whole days in [start, end), from the old hourly ones (as before)."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT date_trunc('day', bucket), snapshots, span_s, statements FROM {HOURLY} "
            "WHERE server_id = %s AND bucket >= %s AND bucket < %s ORDER BY bucket",
            [server_id, start, end],
        )
        rows = cur.fetchall()
    by_day: dict[datetime, list] = {}
    for day, snapshots, span_s, payload in rows:
        by_day.setdefault(day, []).append((snapshots, span_s, payload))
    for day, items in by_day.items():
        blocks = [codec.decode(bytes(p)) for _, _, p in items]
        _insert(DAILY, server_id, day, sum(s for s, _, _ in items), sum(s for _, s, _ in items), merge(blocks))
    return len(by_day)


# -- the old read path (5b72573:readtier.py), table names aside -----------------------


@dataclass
class StatementTotals:
    start: datetime
    end: datetime
    block: codec.Block
    span_s: float = 0.0
    planning_tracked_s: float = 0.0
    dealloc_delta: int | None = None
    intervals: int = 0
    resolutions: list[str] = field(default_factory=list)

    @property
    def planning(self) -> str:
        if self.planning_tracked_s <= 0:
            return "not tracked"
        if self.planning_tracked_s < self.span_s:
            return "partly tracked"
        return "tracked"


def _fetch(query: str, params: list) -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchall()


def _whole_buckets(table: str, server_id: int, start: datetime, end: datetime, size: timedelta) -> list[tuple]:
    return _fetch(
        f"SELECT bucket, snapshots, span_s, planning_tracked_s, dealloc_delta, statements FROM {table} "
        "WHERE server_id = %s AND bucket >= %s AND bucket + %s <= %s ORDER BY bucket",
        [server_id, start, size, end],
    )


def statement_totals(server_id: int, start: datetime, end: datetime) -> StatementTotals:
    totals = StatementTotals(start, end, codec.Block.empty())
    blocks: list[codec.Block] = []
    covered: list[tuple[datetime, datetime]] = []
    dealloc: list[int] = []

    def take_rollups(table: str, size: timedelta, label: str) -> None:
        for bucket, snapshots, span_s, tracked_s, dd, payload in _whole_buckets(table, server_id, start, end, size):
            if any(a <= bucket < b for a, b in covered):
                continue
            covered.append((bucket, bucket + size))
            blocks.append(codec.decode(bytes(payload)))
            totals.span_s += span_s
            totals.planning_tracked_s += tracked_s
            totals.intervals += snapshots
            if dd is not None:
                dealloc.append(dd)
            if label not in totals.resolutions:
                totals.resolutions.append(label)

    window = end - start
    if window >= DAILY_FROM:
        take_rollups(DAILY, DAY, "daily")
    if window >= HOURLY_FROM:
        take_rollups(HOURLY, HOUR, "hourly")

    rows = _fetch(
        f"SELECT taken_at, interval_s, track_planning, dealloc_delta, statements FROM {TABLES.SNAPSHOT.name} "
        "WHERE server_id = %s AND taken_at >= %s AND taken_at < %s AND kind = 'delta' ORDER BY taken_at",
        [server_id, start, end],
    )
    used_raw = False
    for taken_at, interval_s, track_planning, dd, payload in rows:
        if any(a <= taken_at < b for a, b in covered):
            continue
        used_raw = True
        if payload is not None:
            blocks.append(codec.decode(bytes(payload)))
        totals.span_s += interval_s
        totals.planning_tracked_s += interval_s if track_planning else 0.0
        totals.intervals += 1
        if dd is not None:
            dealloc.append(dd)
    if used_raw:
        totals.resolutions.append("raw")
    totals.block = merge(blocks)
    totals.dealloc_delta = sum(dealloc) if dealloc else None
    return totals


ORDERS = {
    "total": lambda c: c[:, C["total_exec_us"]] + c[:, C["total_plan_us"]],
    "exec": lambda c: c[:, C["total_exec_us"]],
    "plan": lambda c: c[:, C["total_plan_us"]],
    "calls": lambda c: c[:, C["calls"]],
    "mean": lambda c: c[:, C["total_exec_us"]] / np.maximum(c[:, C["calls"]], 1),
}


@dataclass
class TopStatement:
    statement_id: int
    queryid: int
    database: str
    user: str
    toplevel: bool
    calls: int
    plans: int | None
    total_exec_ms: float
    total_plan_ms: float | None
    mean_exec_ms: float | None
    rows: int
    shared_blks_hit: int
    shared_blks_read: int
    temp_blks_read: int
    temp_blks_written: int
    max_exec_ms: float | None
    query: str | None


def top_statements(
    server_id: int, start: datetime, end: datetime, *, order: str = "total", limit: int = 20
) -> tuple[StatementTotals, list[TopStatement]]:
    totals = statement_totals(server_id, start, end)
    block = totals.block
    if not len(block):
        return totals, []
    key = ORDERS[order](block.counters)
    picked = np.argsort(-key, kind="stable")[:limit]
    ids = block.statement_id[picked].tolist()
    dims = {s.pk: s for s in Statement.objects.filter(pk__in=ids)}
    tracked = totals.planning != "not tracked"
    out = []
    for i, sid in zip(picked.tolist(), ids, strict=True):
        c = block.counters[i]
        s = dims.get(sid)
        calls = int(c[C["calls"]])
        exec_ms = c[C["total_exec_us"]] / 1000.0
        max_exec = block.gauges[i, G["max_exec_ms"]]
        out.append(
            TopStatement(
                statement_id=sid,
                queryid=s.queryid if s else 0,
                database=s.database_name if s else "",
                user=s.user_name if s else "",
                toplevel=s.toplevel if s else True,
                calls=calls,
                plans=int(c[C["plans"]]) if tracked else None,
                total_exec_ms=exec_ms,
                total_plan_ms=c[C["total_plan_us"]] / 1000.0 if tracked else None,
                mean_exec_ms=exec_ms / calls if calls else None,
                rows=int(c[C["rows"]]),
                shared_blks_hit=int(c[C["shared_blks_hit"]]),
                shared_blks_read=int(c[C["shared_blks_read"]]),
                temp_blks_read=int(c[C["temp_blks_read"]]),
                temp_blks_written=int(c[C["temp_blks_written"]]),
                max_exec_ms=None if np.isnan(max_exec) else float(max_exec),
                query=s.query if s else None,
            )
        )
    return totals, out


def merge(blocks: list[codec.Block]) -> codec.Block:
    """Sum counters per statement over several blocks; min of mins, max of maxes."""
    blocks = [b for b in blocks if len(b)]
    if not blocks:
        return codec.Block.empty()
    ids = np.concatenate([b.statement_id for b in blocks])
    counters = np.concatenate([b.counters for b in blocks])
    gauges = np.concatenate([b.gauges for b in blocks])
    uniq, inverse = np.unique(ids, return_inverse=True)
    summed = np.zeros((len(uniq), counters.shape[1]), np.int64)
    np.add.at(summed, inverse, counters)
    merged = np.full((len(uniq), gauges.shape[1]), np.nan)
    for j, name in enumerate(FACT_GAUGE_NAMES):
        col = gauges[:, j]
        ok = ~np.isnan(col)
        if name.startswith("min_"):
            acc = np.full(len(uniq), np.inf)
            np.minimum.at(acc, inverse[ok], col[ok])
            merged[:, j] = np.where(np.isinf(acc), np.nan, acc)
        else:
            acc = np.full(len(uniq), -np.inf)
            np.maximum.at(acc, inverse[ok], col[ok])
            merged[:, j] = np.where(np.isinf(acc), np.nan, acc)
    return codec.Block(uniq, summed, merged)
