"""Read-side queries over the history store. Picks the coarsest resolution that fits a window:
daily rollups for whole days, hourly rollups for whole hours, raw snapshots for the rest."""
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from django.db import connection

from collectors import codec
from collectors.columns import COUNTER_NAMES, FACT_GAUGE_NAMES
from collectors.models import Statement

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
# Below these window lengths, finer data is cheap enough to read whole.
HOURLY_FROM = timedelta(hours=6)
DAILY_FROM = timedelta(days=14)
C = {name: i for i, name in enumerate(COUNTER_NAMES)}
G = {name: i for i, name in enumerate(FACT_GAUGE_NAMES)}


@dataclass
class StatementTotals:
    start: datetime
    end: datetime
    block: codec.Block
    span_s: float = 0.0  # seconds of intervals covered by history in the window
    planning_tracked_s: float = 0.0  # of which with track_planning = on
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
    """Summed statement deltas of snapshots taken in [start, end)."""
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
        take_rollups("collectors_statement_daily", DAY, "daily")
    if window >= HOURLY_FROM:
        take_rollups("collectors_statement_hourly", HOUR, "hourly")

    rows = _fetch(
        "SELECT taken_at, interval_s, track_planning, dealloc_delta, statements FROM collectors_snapshot "
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
    totals.block = codec.merge(blocks)
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
    total_plan_ms: float | None  # None: planning not tracked in the window
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
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}: one of {', '.join(ORDERS)}")
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
