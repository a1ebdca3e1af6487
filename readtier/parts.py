"""Reading the parts of a plan: raw snapshots of the edges, and the server's totals over a window."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

import numpy as np

from history.public import TABLES, TOTAL_NAMES, Sums, add_sums, sums_from_payloads
from readtier import db
from readtier.windows import ReadPlan

N = len(TOTAL_NAMES)
_TOTALS_SQL = ", ".join(TOTAL_NAMES)


class PlanningState(StrEnum):
    """Whether planning time was tracked over some history (track_planning, per interval), in the words every
    surface shows (a page, the API, the mail, an audit bundle): planning not tracked is never 0 ms."""

    TRACKED = "tracked"
    PARTLY_TRACKED = "partly tracked"
    NOT_TRACKED = "not tracked"
    NO_DATA = "no data"


def planning_state(tracked_s: float, span_s: float) -> PlanningState:
    """Whether planning time was tracked over some seconds of history."""
    if span_s <= 0:
        return PlanningState.NO_DATA
    if tracked_s <= 0:
        return PlanningState.NOT_TRACKED
    if tracked_s < span_s:
        return PlanningState.PARTLY_TRACKED
    return PlanningState.TRACKED


def relative_change(now: float | None, before: float | None) -> float | None:
    """A figure's change against before, as a ratio (0.25 = +25%); None where either is unknown or before is 0."""
    if now is None or before is None or before == 0:
        return None
    return now / before - 1.0


@dataclass
class ServerTotals:
    """A server's sums over a window (or a bucket): what the interval deltas of all its statements add up to."""

    snapshots: int = 0
    span_s: float = 0.0  # seconds covered by the intervals read
    planning_tracked_s: float = 0.0  # of which with track_planning on
    values: np.ndarray = field(default_factory=lambda: np.zeros(N, np.int64))  # TOTAL_NAMES
    dealloc: int | None = None  # None: no interval knew it (pg_stat_statements_info needs 14+)
    dealloc_span_s: float = 0.0
    entries_peak: int | None = None
    entries_max: int | None = None  # the setting as the latest snapshot added read it
    entries_max_at: datetime | None = None  # when that snapshot was taken (None: unknown, the last added wins)
    wait_session_s: float = 0.0

    def add(self, other: ServerTotals) -> None:
        self.snapshots += other.snapshots
        self.span_s += other.span_s
        self.planning_tracked_s += other.planning_tracked_s
        self.values = self.values + other.values
        if other.dealloc is not None:
            self.dealloc = (self.dealloc or 0) + other.dealloc
        self.dealloc_span_s += other.dealloc_span_s
        if other.entries_peak is not None:
            self.entries_peak = max(self.entries_peak or 0, other.entries_peak)
        if other.entries_max is not None and not (
            self.entries_max_at and other.entries_max_at and other.entries_max_at < self.entries_max_at
        ):
            self.entries_max, self.entries_max_at = other.entries_max, other.entries_max_at or self.entries_max_at
        self.wait_session_s += other.wait_session_s

    @classmethod
    def of_snapshot(
        cls,
        interval_s: float,
        tracked: bool | None,
        figures,
        dealloc: int | None,
        entries: int,
        entries_max: int | None,
        *,
        sign: int = 1,
        wait_session_s: float = 0.0,
        at: datetime | None = None,
    ) -> ServerTotals:
        """One delta snapshot's totals, counted with `sign` (-1: a part subtracted from a whole hour; gauges,
        not being sums, count only from snapshots inside the window)."""
        return cls(
            snapshots=sign,
            span_s=sign * interval_s,
            planning_tracked_s=sign * interval_s if tracked else 0.0,
            values=sign * np.array([int(v or 0) for v in figures], np.int64),
            dealloc=None if dealloc is None else sign * dealloc,
            dealloc_span_s=sign * interval_s if dealloc is not None else 0.0,
            entries_peak=entries if sign > 0 else None,
            entries_max=entries_max if sign > 0 else None,
            entries_max_at=at if sign > 0 and entries_max is not None else None,
            wait_session_s=sign * wait_session_s,
        )

    def get(self, name: str) -> int:
        return int(self.values[TOTAL_NAMES.index(name)])

    @property
    def planning(self) -> PlanningState:
        return planning_state(self.planning_tracked_s, self.span_s)

    def per_s(self, name: str, scale: float = 1.0) -> float | None:
        """A figure per second of history covered (scale 1/1000: µs to ms); None without data."""
        return self.get(name) * scale / self.span_s if self.span_s else None

    @property
    def plan_ms_per_s(self) -> float | None:
        """Over the seconds planning was tracked; None where it never was (not 0)."""
        return self.get("plan_us") / 1000 / self.planning_tracked_s if self.planning_tracked_s > 0 else None

    @property
    def dealloc_per_s(self) -> float | None:
        return self.dealloc / self.dealloc_span_s if self.dealloc is not None and self.dealloc_span_s else None


def read_raw(server_id: int, segments: list[tuple[datetime, datetime, int]], *, statements: bool = True):
    """(server totals, per-statement sums) of the delta snapshots taken in the segments, each counted
    with its segment's sign (an edge read as a whole hour less the part outside the window)."""
    totals = ServerTotals()
    if not segments:
        return totals, Sums.empty()
    where = " OR ".join("(taken_at >= %s AND taken_at < %s)" for _ in segments)
    payload = "statements" if statements else "NULL::bytea"
    rows = db.fetchall(
        f"SELECT taken_at, interval_s, coalesce(track_planning, false), dealloc_delta, entries, entries_max, "
        f"{', '.join(f'coalesce({c}, -1)' for c in TOTAL_NAMES)}, {payload}, "
        f"(SELECT coalesce(sum(session_s), 0) FROM {TABLES.WAIT_EVENT.name} w "
        f" WHERE w.server_id = s.server_id AND w.taken_at = s.taken_at)::float8 "
        f"FROM {TABLES.SNAPSHOT.name} s WHERE server_id = %s AND kind = 'delta' AND ({where}) ORDER BY taken_at",
        [server_id, *(v for a, b, _ in segments for v in (a, b))],
        binary=True,
    )
    payloads: dict[int, list[bytes]] = {+1: [], -1: []}
    for taken_at, interval_s, tracked, dd, entries, entries_max, *rest in rows:
        sign = next(sg for a, b, sg in segments if a <= taken_at < b)
        figures, blob, waits = rest[:N], rest[N], rest[N + 1]
        if blob is not None:
            payloads[sign].append(bytes(blob))
        if figures[0] < 0:  # written before the totals columns existed: from the block
            figures = sums_from_payloads([bytes(blob)]).values.sum(axis=0) if blob is not None else [0] * N
        totals.add(
            ServerTotals.of_snapshot(
                interval_s, tracked, figures, dd, entries, entries_max, sign=sign, wait_session_s=waits, at=taken_at
            )
        )
    if not statements:
        return totals, Sums.empty()
    plus, minus = sums_from_payloads(payloads[+1]), sums_from_payloads(payloads[-1])
    return totals, add_sums(plus, Sums(minus.statement_id, -minus.values))


def bucket_sums(entries_max: str) -> str:
    """The select list that adds up server buckets (or snapshots shaped like them), in bucket_totals' order;
    `entries_max` picks the setting. int8 sums are cast back from numeric, so that thousands of rows (a
    fleet) load as plain ints."""
    return (
        "sum(snapshots)::int8, sum(span_s), sum(planning_tracked_s), "
        + ", ".join(f"sum({c})::int8" for c in TOTAL_NAMES)
        + f", sum(dealloc_delta)::int8, sum(dealloc_span_s), max(entries_peak), {entries_max}, sum(wait_session_s)"
    )


# Sums of server buckets with their count; entries_max: the latest bucket's.
BUCKET_FIGURES = "count(*), " + bucket_sums("(array_agg(entries_max ORDER BY bucket DESC))[1]")


def bucket_totals(row) -> ServerTotals:
    """ServerTotals from a row of BUCKET_FIGURES (without its leading count)."""
    snapshots, span_s, tracked_s, *rest = row
    figures, (dd, dd_span, peak, emax, waits) = rest[:N], rest[N:]
    return ServerTotals(
        snapshots=int(snapshots or 0),
        span_s=float(span_s or 0),
        planning_tracked_s=float(tracked_s or 0),
        values=np.array([int(v or 0) for v in figures], np.int64),
        dealloc=None if dd is None else int(dd),
        dealloc_span_s=float(dd_span or 0),
        entries_peak=peak,
        entries_max=emax,
        wait_session_s=float(waits or 0),
    )


def core_totals(server_id: int, core: tuple[datetime, datetime] | None) -> ServerTotals:
    """Server totals over an hour-aligned range: hourly buckets, and daily ones where hours have expired."""
    if core is None:
        return ServerTotals()
    s, e = core
    row = db.fetchone(
        f"""
            WITH hf AS (SELECT min(bucket) AS b FROM {TABLES.SERVER_HOURLY.name} WHERE server_id = %(sid)s)
            SELECT {BUCKET_FIGURES} FROM (
                SELECT * FROM {TABLES.SERVER_HOURLY.name}
                WHERE server_id = %(sid)s AND bucket >= %(s)s AND bucket < %(e)s
                UNION ALL
                SELECT d.* FROM {TABLES.SERVER_DAILY.name} d, hf WHERE server_id = %(sid)s AND bucket >= %(s)s
                AND bucket + interval '1 day' <= %(e)s AND (hf.b IS NULL OR bucket + interval '1 day' <= hf.b)
            ) parts
            """,
        {"sid": server_id, "s": s, "e": e},
    )
    totals = bucket_totals(row[1:])
    if totals.entries_max is not None:  # read by the range's last snapshot: before any raw edge after it
        totals.entries_max_at = e - timedelta(microseconds=1)
    return totals


def window_totals(server_id: int, p: ReadPlan, raw: ServerTotals | None = None) -> ServerTotals:
    totals = raw if raw is not None else read_raw(server_id, p.raw, statements=False)[0]
    out = ServerTotals()
    out.add(totals)
    out.add(core_totals(server_id, p.core))
    return out
