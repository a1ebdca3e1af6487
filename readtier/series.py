"""Time series of a statement and of a server, for charts.

Rates are sums over the span of the intervals behind a point, never over the point's width: a
snapshot taken after an outage spans the outage, so its deltas show as their average over it, and
the buckets of the outage itself have no data: a gap is a gap (None), not a zero.

One module over 400 lines: a statement's series and a server's are cut by the same rules (the resolution chosen for
a window, the grid of its buckets, a rate over the seconds known, a gap kept a gap); split, those rules would be
shared by import across two modules that each need all of them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import numpy as np

from history.public import (
    DAY,
    HOUR,
    TABLES,
    TOTAL_NAMES,
    HistoryTable,
    day_of,
    decode_block,
    event_label,
    month_of,
    totals_of,
)
from readtier import db, windows
from readtier.parts import BUCKET_FIGURES, PlanningState, ServerTotals, bucket_totals
from readtier.windows import Window, WindowError

RESOLUTIONS = ("raw", "10min", "hourly", "daily")  # a server's series
STATEMENT_RESOLUTIONS = ("raw", "hourly", "daily")  # a statement's (10-minute bins would decode every snapshot)
RAW_UP_TO = timedelta(hours=6)  # automatic resolution: raw points up to 6 h (360 at one a minute)
# A server's series up to two days: its snapshots summed in 10-minute bins (144 points a day, read from the raw
# snapshots' server totals, no statement decoded); a statement's series stays hourly there.
FINE_UP_TO = timedelta(hours=48)
FINE_STEP = timedelta(minutes=10)
HOURLY_UP_TO = timedelta(days=31)  # hourly up to a month, daily beyond
# A chart reads a shape from about 100 to 400 points: a range read hourly with more hours than this (a month:
# 720) is drawn in points of 2 hours (or more: a divisor of a day), summed from the hourly tier.
MAX_POINTS = 400
# The last minutes of a range ending now are always drawn snapshot by snapshot, whatever the hour they fall in.
FRESH = timedelta(minutes=10)
_STEP = {"hourly": HOUR, "daily": DAY}
# Raw snapshots summed per bucket as a row of BUCKET_FIGURES (with its leading count), as the tiers sum them.
_SNAPSHOT_FIGURES = (
    "count(*), count(*), sum(interval_s), sum(CASE WHEN track_planning THEN interval_s ELSE 0 END), "
    + ", ".join(f"sum({c})" for c in TOTAL_NAMES)
    + ", sum(dealloc_delta), sum(CASE WHEN dealloc_delta IS NOT NULL THEN interval_s ELSE 0 END), max(entries), "
    "(array_agg(entries_max ORDER BY taken_at DESC))[1], 0"
)
_TIERS = {
    "hourly": (TABLES.SERVER_HOURLY, TABLES.STATEMENT_HOURLY, day_of),
    "daily": (TABLES.SERVER_DAILY, TABLES.STATEMENT_DAILY, month_of),
}


def choose_resolution(window: Window, cov: windows.Coverage, asked: str | None, *, fine: bool = False) -> str:
    """`fine`: the series can be read in 10-minute bins (a server's, from its snapshots' totals)."""
    if asked is not None:
        if asked not in RESOLUTIONS or (asked == "10min" and not fine):
            allowed = [r for r in RESOLUTIONS if fine or r != "10min"]
            raise WindowError(f"unknown resolution {asked!r}: one of {', '.join(allowed)}")
        return asked
    length = window.end - window.start
    # A history younger than the window (a new server) is judged from its first figures: its first hour is
    # drawn from its snapshots, not as the one point of a daily bucket, and its hours begin with the hour of its
    # first delta (a baseline taken at 17:59 holds no figures: the hourly tier from 18:00 holds them all).
    since = max(window.start, cov.figures_from) if cov.figures_from is not None else window.start
    if length <= RAW_UP_TO and cov.raw_from is not None and cov.raw_from <= since:
        return "raw"
    if fine and length <= FINE_UP_TO and cov.raw_from is not None and cov.raw_from <= since and _dense(cov):
        return "10min"
    if length <= HOURLY_UP_TO and (cov.hourly_from is None or cov.hourly_from <= since):
        return "hourly"
    return "daily"


def _dense(cov: windows.Coverage) -> bool:
    """Collected at least twice a bin: a server collected every 10 or 30 minutes would show bins without a
    snapshot between the ones with one, gaps where nothing was missed; its day is drawn by the hour."""
    return cov.recent_interval_s is not None and cov.recent_interval_s <= FINE_STEP.total_seconds() / 2


def _hours_per_point(grid: list[datetime], automatic: bool) -> int:
    """1, or the hours each point of an automatic hourly series sums so that it has at most MAX_POINTS."""
    if not automatic or len(grid) <= MAX_POINTS:
        return 1
    return next(h for h in (2, 3, 4, 6, 8, 12, 24) if len(grid) / h <= MAX_POINTS)


def _points_of(grid: list[datetime], hours: int, window: Window) -> tuple[dict, list[tuple[datetime, datetime]]]:
    """Hourly buckets gathered `hours` by `hours` (aligned on the UTC day): {bucket: its point's start} and the
    points' (start, end), over the buckets each holds. The hours that hold the last FRESH minutes of a window
    ending inside an hour stay points of their own, which the chart draws snapshot by snapshot (_cut_bucket)."""
    width = HOUR * hours
    of = {}
    for b in grid:
        day = day_of(b)
        of[b] = (
            b if b + HOUR > window.end - FRESH and grid[-1] + HOUR > window.end else day + (b - day) // width * width
        )
    spans: dict[datetime, list[datetime]] = {}
    for b in grid:
        spans.setdefault(of[b], []).append(b)
    points = [(min(bs), max(bs) + HOUR) for bs in spans.values()]
    return {b: min(spans[key]) for b, key in of.items()}, points


def _floor(at: datetime, resolution: str) -> datetime:
    return windows.floor_hour(at) if resolution == "hourly" else day_of(at)


def _grid(window: Window, resolution: str) -> list[datetime]:
    """Bucket starts covering the window (buckets at its edges are included whole)."""
    step = _STEP[resolution]
    at, out = _floor(window.start, resolution), []
    while at < window.end:
        out.append(at)
        at += step
    return out


def _rate(value: float, span_s: float | None) -> float | None:
    return value / span_s if span_s else None


# -- one statement ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatementPoint:
    start: datetime
    end: datetime
    span_s: float | None  # seconds of intervals behind the point; None: no data (a gap)
    planning_tracked: bool | None  # None: gap; False: track_planning was off for the whole point
    calls: int | None
    calls_per_s: float | None
    mean_exec_ms: float | None
    mean_plan_ms: float | None  # None where planning was not tracked (never 0 for "not tracked")
    rows_per_call: float | None
    hit_ratio: float | None
    temp_blks: int | None


@dataclass(frozen=True)
class StatementSeries:
    statement_id: int
    server_id: int
    window: Window
    resolution: str
    points: list[StatementPoint]


_AT = {name: i for i, name in enumerate(TOTAL_NAMES)}
_CALLS, _PLANS, _EXEC, _PLAN, _ROWS = _AT["calls"], _AT["plans"], _AT["exec_us"], _AT["plan_us"], _AT["rows"]
_HIT, _READ, _TEMP = _AT["shared_blks_hit"], _AT["shared_blks_read"], _AT["temp_blks"]
_NOTHING = (0,) * len(TOTAL_NAMES)


def _statement_point(start, end, span_s, tracked_s, f: Sequence[int] | None) -> StatementPoint:
    """f: the statement's figures over the point, in TOTAL_NAMES order (None: it did not run)."""
    if not span_s:
        return StatementPoint(start, end, None, None, None, None, None, None, None, None, None)
    f = f or _NOTHING
    calls, plans, blocks = f[_CALLS], f[_PLANS], f[_HIT] + f[_READ]
    tracked = tracked_s > 0
    return StatementPoint(
        start=start,
        end=end,
        span_s=span_s,
        planning_tracked=tracked,
        calls=calls,
        calls_per_s=calls / span_s,
        mean_exec_ms=f[_EXEC] / 1000 / calls if calls else None,
        mean_plan_ms=f[_PLAN] / 1000 / plans if tracked and plans else None,
        rows_per_call=f[_ROWS] / calls if calls else None,
        hit_ratio=f[_HIT] / blocks if blocks else None,
        temp_blks=f[_TEMP],
    )


def statement_series(*, statement_id: int, window: Window, resolution: str | None = None) -> StatementSeries:
    """One statement's calls/s, mean execution and planning time, rows per call, hit ratio and temp
    blocks over a window, at the resolution asked for or the one that fits the window."""
    found = db.fetchall(f"SELECT server_id FROM {TABLES.STATEMENT.name} WHERE id = %s", [statement_id])
    if not found:
        raise LookupError(f"no statement {statement_id}")
    server_id = found[0][0]
    cov = windows.coverage(server_id)
    automatic = resolution is None
    resolution = choose_resolution(window, cov, resolution)
    if resolution == "raw":
        points = _statement_raw(server_id, statement_id, window)
    else:
        hours = _hours_per_point(_grid(window, resolution), automatic) if resolution == "hourly" else 1
        points = _statement_buckets(server_id, statement_id, window, resolution, cov, hours=hours)
        resolution = f"{hours}h" if hours > 1 else resolution
        cut = _cut_bucket(points, window, resolution, cov) if automatic else None
        if cut is not None and (tail := _statement_raw(server_id, statement_id, cut[1])):
            points = points[: cut[0]] + tail
    return StatementSeries(statement_id, server_id, window, resolution, points)


def _cut_bucket(points: list, window: Window, resolution: str, cov: windows.Coverage) -> tuple[int, Window] | None:
    """(i, the window from points[i]'s start): the hours (or 10-minute bins) that hold the window's last FRESH
    minutes, when the window ends inside one (on a range ending now) and their snapshots are kept:
    drawn snapshot by snapshot, so that what began a minute ago shows at the right edge instead of averaged
    into its hour (at 17:00:30, the hour before too). Only where the resolution was chosen for a chart (a
    caller that asks for hours gets hours); the caller keeps the points where no snapshot is there. A server
    added inside that hour has it drawn snapshot by snapshot too: there is nothing before its first one."""
    if resolution == "daily" or not points or points[-1].end <= window.end:
        return None
    i = next(i for i, p in enumerate(points) if p.end > window.end - FRESH)
    start = points[i].start
    return (i, Window(start, window.end)) if cov.snapshots_hold_all_from(start) and start < window.end else None


def _statement_snapshots(server_id: int, statement_id: int, start: datetime, end: datetime):
    """(prev_taken_at, taken_at, interval_s, track_planning, the statement's figures or None) of every delta
    snapshot taken in [start, end), in order."""
    rows = db.fetchall(
        f"SELECT prev_taken_at, taken_at, interval_s, track_planning, statements FROM {TABLES.SNAPSHOT.name} "
        "WHERE server_id = %s AND kind = 'delta' AND taken_at >= %s AND taken_at < %s ORDER BY taken_at",
        [server_id, start, end],
    )
    for prev, taken, interval_s, tracked, payload in rows:
        f = None
        if payload is not None:
            block = decode_block(bytes(payload))
            i = int(block.statement_id.searchsorted(statement_id))
            if i < len(block) and block.statement_id[i] == statement_id:
                f = totals_of(block.counters[i : i + 1])[0].tolist()
        yield prev, taken, interval_s, tracked, f


def _statement_raw(server_id: int, statement_id: int, window: Window) -> list[StatementPoint]:
    snapshots = _statement_snapshots(server_id, statement_id, window.start, window.end)
    return [
        _statement_point(prev, taken, interval_s, interval_s if tracked else 0.0, f)
        for prev, taken, interval_s, tracked, f in snapshots
    ]


_FIGURES = ", ".join(f"coalesce({c}, 0)" for c in TOTAL_NAMES)  # the statement tiers store 0 as NULL


def _running_sums(
    table: HistoryTable, server_id: int, statement_id: int, first: datetime, last: datetime, step: timedelta
) -> list[tuple]:
    """(until, *figures) at every boundary from `first` to `last` where the statement has a row, in order.

    One index probe per boundary, in one query: the range prunes the partitions at plan time and the
    boundaries come from generate_series in an InitPlan, which the planner does not look into. Boundaries
    sent as an array made it estimate each one against each partition (15 ms for a month of hours), one
    query per partition planned 31 of them (9-11 ms), and a lateral join re-pruned at each probe (300 ms)."""
    return db.fetchall(
        f"SELECT until, {_FIGURES} FROM {table.name} WHERE server_id = %s AND statement_id = %s "
        "AND until >= %s AND until <= %s AND until = ANY(ARRAY("
        "SELECT generate_series(%s::timestamptz, %s::timestamptz, make_interval(secs => %s)))) ORDER BY until",
        [server_id, statement_id, first, last, first, last, step.total_seconds()],
        binary=True,
    )


def _statement_buckets(
    server_id: int, statement_id: int, window: Window, resolution: str, cov: windows.Coverage, *, hours: int = 1
) -> list[StatementPoint]:
    """`hours`: hourly buckets summed by that many into each point."""
    server_table, statement_table, period_of = _TIERS[resolution]
    step = _STEP[resolution]
    grid = _grid(window, resolution)
    buckets = {
        b: (span_s, tracked_s)
        for b, span_s, tracked_s in db.fetchall(
            f"SELECT bucket, span_s, planning_tracked_s FROM {server_table.name} "
            "WHERE server_id = %s AND bucket >= %s AND bucket < %s ORDER BY bucket",
            [server_id, grid[0], grid[-1] + step],
            binary=True,
        )
    }
    # The running sums restart with each period (a UTC day for hours, a month for days): a bucket's
    # figures are its end's sums less those at the statement's previous row in the same period, read
    # from the period's start. A boundary without a row between them is one where the statement did not
    # run yet that period or the server has no bucket: nothing ran there (see history/tiers.py).
    rows = _running_sums(statement_table, server_id, statement_id, period_of(grid[0]) + step, grid[-1] + step, step)
    deltas: dict[datetime, list[int]] = {}
    if rows:
        untils = [r[0] for r in rows]
        sums = np.array([r[1:] for r in rows], dtype=np.int64)
        before = np.zeros_like(sums)
        before[1:] = sums[:-1]
        periods = [period_of(u - step) for u in untils]
        before[[i for i in range(len(rows)) if i == 0 or periods[i] != periods[i - 1]]] = 0
        deltas = dict(zip(untils, (sums - before).tolist(), strict=True))
    if resolution == "hourly":
        # The hour in progress (and any the rollup has not reached yet), from the snapshots taken since the
        # tier was built, as server_series reads it: a statement that ran only in the last minutes is drawn.
        built = max(grid[0], cov.hours_built_until or grid[0])
        snapshots = _statement_snapshots(server_id, statement_id, built, grid[-1] + step) if built < window.end else ()
        for _, taken, interval_s, tracked, f in snapshots:
            b = _floor(taken, resolution)
            span_s, tracked_s = buckets.get(b, (0.0, 0.0))
            buckets[b] = (span_s + interval_s, tracked_s + (interval_s if tracked else 0.0))
            if f is not None:
                d = deltas.get(b + step, [0] * len(TOTAL_NAMES))
                deltas[b + step] = [x + y for x, y in zip(d, f, strict=True)]
    spans = [(b, b + step) for b in grid]
    if hours > 1:  # every figure is a sum: the points of several hours are the sums of theirs
        of, spans = _points_of(grid, hours, window)
        grouped: dict[datetime, tuple[float, float]] = {}
        grouped_deltas: dict[datetime, list[int]] = {}
        for b in grid:
            if b in buckets:
                span_s, tracked_s = grouped.get(of[b], (0.0, 0.0))
                grouped[of[b]] = (span_s + buckets[b][0], tracked_s + buckets[b][1])
            if (d := deltas.get(b + step)) is not None:
                before = grouped_deltas.get(of[b], [0] * len(TOTAL_NAMES))
                grouped_deltas[of[b]] = [x + y for x, y in zip(before, d, strict=True)]
        buckets = grouped
        deltas = {e: grouped_deltas[a] for a, e in spans if a in grouped_deltas}  # keyed by end, as above
    out = []
    for a, e in spans:
        span_s, tracked_s = buckets.get(a, (None, 0.0))
        out.append(_statement_point(a, e, span_s, tracked_s, deltas.get(e)))
    return out


# -- one server ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerPoint:
    start: datetime
    end: datetime
    span_s: float | None  # None: no data (a gap)
    planning: PlanningState | None  # None: a gap
    calls_per_s: float | None
    exec_ms_per_s: float | None
    plan_ms_per_s: float | None  # None where planning was not tracked
    dealloc_per_s: float | None  # None where unknown (pg_stat_statements_info needs 14+)
    entries_peak: int | None
    entries_max: int | None  # pg_stat_statements.max
    hit_ratio: float | None
    active_sessions: dict[str, float]  # wait event (top N and "other") -> average active sessions


@dataclass(frozen=True)
class ServerSeries:
    server_id: int
    window: Window
    resolution: str
    events: list[str]  # the wait events charted, heaviest first ("other" last)
    points: list[ServerPoint]


def _server_point(start, end, t: ServerTotals | None, waits: dict[str, float]) -> ServerPoint:
    if t is None or not t.span_s:
        return ServerPoint(start, end, None, None, None, None, None, None, None, None, None, {})
    hit, read = t.get("shared_blks_hit"), t.get("shared_blks_read")
    return ServerPoint(
        start=start,
        end=end,
        span_s=t.span_s,
        planning=t.planning,
        calls_per_s=t.per_s("calls"),
        exec_ms_per_s=t.per_s("exec_us", 1 / 1000),
        plan_ms_per_s=t.plan_ms_per_s,
        dealloc_per_s=t.dealloc_per_s,
        entries_peak=t.entries_peak,
        entries_max=t.entries_max,
        hit_ratio=hit / (hit + read) if hit + read else None,
        active_sessions={k: v / t.span_s for k, v in waits.items()},
    )


def _top_events(per_point: dict, top: int) -> list[str]:
    weight: dict[str, float] = {}
    for events in per_point.values():
        for label, s in events.items():
            weight[label] = weight.get(label, 0.0) + s
    ranked = sorted(weight, key=lambda k: (-weight[k], k))
    return ranked[:top] + (["other"] if len(ranked) > top else [])


def _fold(events: dict[str, float], keep: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for label, s in events.items():
        key = label if label in keep else "other"
        out[key] = out.get(key, 0.0) + s
    return out


def server_series(
    *, server_id: int, window: Window, resolution: str | None = None, top_events: int = 5
) -> ServerSeries:
    """A server's calls/s, execution and planning time per second, dealloc/s, entries against
    pg_stat_statements.max, hit ratio, and wait events as average active sessions (top N + other)."""
    cov = windows.coverage(server_id)
    automatic = resolution is None
    resolution = choose_resolution(window, cov, resolution, fine=True)
    if resolution == "raw":
        return _server_raw(server_id, window, top_events)
    if resolution == "10min":
        series = _server_binned(server_id, window, top_events)
    else:
        series = _server_tiered(server_id, window, resolution, cov, top_events, automatic)
    cut = _cut_bucket(series.points, window, series.resolution, cov) if automatic else None
    if cut is not None and (tail := _server_raw(server_id, cut[1], top_events, events=series.events).points):
        series = replace(series, points=series.points[: cut[0]] + tail)
    return series


def _server_tiered(
    server_id: int, window: Window, resolution: str, cov: windows.Coverage, top_events: int, automatic: bool
) -> ServerSeries:
    """The server's hourly or daily buckets (with the raw snapshots not rolled up yet), an automatic month's
    hours gathered into points of 2 hours or more."""
    server_table = _TIERS[resolution][0]
    step = _STEP[resolution]
    grid = _grid(window, resolution)
    lo, hi = grid[0], grid[-1] + step
    unit = "hour" if resolution == "hourly" else "day"
    built_until = cov.hours_built_until if resolution == "hourly" else cov.days_built_until
    built_until = built_until or lo
    # Built buckets, and for the tail not rolled up yet the raw snapshots summed per bucket.
    rows = db.fetchall(
        f"SELECT bucket, {BUCKET_FIGURES} FROM {server_table.name} "
        "WHERE server_id = %(s)s AND bucket >= %(lo)s AND bucket < %(hi)s GROUP BY bucket "
        f"UNION ALL SELECT date_trunc('{unit}', taken_at), {_SNAPSHOT_FIGURES} FROM {TABLES.SNAPSHOT.name} "
        "WHERE server_id = %(s)s AND kind = 'delta' AND taken_at >= greatest(%(lo)s, "
        "%(built)s) AND taken_at < %(hi)s GROUP BY 1",
        {"s": server_id, "lo": lo, "hi": hi, "built": built_until},
    )
    totals: dict[datetime, ServerTotals] = {}
    for r in rows:  # the hour in progress: its bucket so far, and the raw snapshots since
        totals.setdefault(r[0], ServerTotals()).add(bucket_totals(r[2:]))
    waits: dict[datetime, dict[str, float]] = {}
    # The buckets' wait totals by event (kept with them, whatever the query_ids) as one JSON object per
    # bucket (decoding it beats a row per bucket and event: 29,000 rows for a month), and the raw tail's.
    for bucket, stored, et, ev, s in db.fetchall(
        f"SELECT bucket, waits::text, NULL, NULL, NULL::float8 FROM {server_table.name} "
        "WHERE server_id = %(s)s AND bucket >= %(lo)s AND bucket < %(hi)s AND waits <> '{}' "
        f"UNION ALL SELECT date_trunc('{unit}', taken_at), NULL, event_type, event, sum(session_s) "
        f"FROM {TABLES.WAIT_EVENT.name} WHERE server_id = %(s)s AND taken_at >= greatest(%(lo)s, %(built)s) "
        "AND taken_at < %(hi)s GROUP BY 1, 2, 3, 4",
        {"s": server_id, "lo": lo, "hi": hi, "built": built_until},
        binary=True,
    ):
        point = waits.setdefault(bucket, {})
        for label, seconds in json.loads(stored).items() if stored is not None else [(event_label(et, ev), s)]:
            point[label] = point.get(label, 0.0) + seconds
    events = _top_events(waits, top_events)
    spans = [(b, b + step) for b in grid]
    if (hours := _hours_per_point(grid, automatic)) > 1:
        of, spans = _points_of(grid, hours, window)
        totals, waits = _grouped(grid, totals, waits, of)
        resolution = f"{hours}h"
    points = [_server_point(a, e, totals.get(a), _fold(waits.get(a, {}), events)) for a, e in spans]
    return ServerSeries(server_id, window, resolution, events, points)


def _grouped(grid: list[datetime], totals: dict, waits: dict, of: dict) -> tuple[dict, dict]:
    """Hourly totals and waits summed into their points (in order: the last pg_stat_statements.max holds)."""
    out_totals: dict[datetime, ServerTotals] = {}
    out_waits: dict[datetime, dict[str, float]] = {}
    for b in grid:
        g = of[b]
        if b in totals:
            out_totals.setdefault(g, ServerTotals()).add(totals[b])
        for label, seconds in waits.get(b, {}).items():
            point = out_waits.setdefault(g, {})
            point[label] = point.get(label, 0.0) + seconds
    return out_totals, out_waits


_BIN = "date_bin(%(step)s::interval, taken_at, '2000-01-01 00:00+00'::timestamptz)"


def _server_binned(server_id: int, window: Window, top_events: int) -> ServerSeries:
    """The server's snapshots summed in FINE_STEP bins (their server totals, as the hourly tier sums them);
    a bin without a snapshot is a gap. Bins at the window's edges are included whole, as hours are."""
    step = FINE_STEP
    lo = datetime.fromtimestamp(window.start.timestamp() // step.total_seconds() * step.total_seconds(), UTC)
    grid = []
    at = lo
    while at < window.end:
        grid.append(at)
        at += step
    params = {"s": server_id, "lo": lo, "hi": grid[-1] + step, "step": f"{int(step.total_seconds())} seconds"}
    rows = db.fetchall(
        f"SELECT {_BIN}, {_SNAPSHOT_FIGURES} FROM {TABLES.SNAPSHOT.name} "
        "WHERE server_id = %(s)s AND kind = 'delta' AND taken_at >= %(lo)s "
        "AND taken_at < %(hi)s GROUP BY 1",
        params,
    )
    totals = {r[0]: bucket_totals(r[2:]) for r in rows}
    waits: dict[datetime, dict[str, float]] = {}
    for b, et, ev, s in db.fetchall(
        f"SELECT {_BIN}, event_type, event, sum(session_s) FROM {TABLES.WAIT_EVENT.name} "
        "WHERE server_id = %(s)s AND taken_at >= %(lo)s AND taken_at < %(hi)s GROUP BY 1, 2, 3",
        params,
    ):
        point = waits.setdefault(b, {})
        label = event_label(et, ev)
        point[label] = point.get(label, 0.0) + s
    events = _top_events(waits, top_events)
    points = [_server_point(b, b + step, totals.get(b), _fold(waits.get(b, {}), events)) for b in grid]
    return ServerSeries(server_id, window, "10min", events, points)


def _server_raw(server_id: int, window: Window, top_events: int, events: list[str] | None = None) -> ServerSeries:
    """`events`: the wait events to chart (those of the series this joins); by default its own top N."""
    rows = db.fetchall(
        f"SELECT prev_taken_at, taken_at, interval_s, track_planning, {', '.join(TOTAL_NAMES)}, dealloc_delta, "
        f"entries, entries_max FROM {TABLES.SNAPSHOT.name} "
        "WHERE server_id = %s AND kind = 'delta' AND taken_at >= %s AND taken_at < %s ORDER BY taken_at",
        [server_id, window.start, window.end],
    )
    waits: dict[datetime, dict[str, float]] = {}
    for taken, et, ev, s in db.fetchall(
        f"SELECT taken_at, event_type, event, sum(session_s) FROM {TABLES.WAIT_EVENT.name} "
        "WHERE server_id = %s AND taken_at >= %s AND taken_at < %s GROUP BY 1, 2, 3",
        [server_id, window.start, window.end],
    ):
        waits.setdefault(taken, {})[event_label(et, ev)] = s
    events = events if events is not None else _top_events(waits, top_events)
    n = len(TOTAL_NAMES)
    points = []
    for prev, taken, interval_s, tracked, *rest in rows:
        figs, (dd, entries, entries_max) = rest[:n], rest[n:]
        t = ServerTotals.of_snapshot(interval_s, tracked, figs, dd, entries, entries_max)
        points.append(_server_point(prev, taken, t, _fold(waits.get(taken, {}), events)))
    return ServerSeries(server_id, window, "raw", events, points)
