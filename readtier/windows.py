"""Time windows and how one is read: each part of a window at exactly one resolution.

A window [start, end) is cut into raw edges (minutes, decoded from the per-snapshot blocks) and
an hour-aligned core answered by the prefix sums of the statement-major tier (tiers.py): inside a
UTC day from the hourly tier, whole days inside a UTC month from the daily tier. A snapshot
belongs to the window when its taken_at is in [start, end): that is the rule every tier follows,
so the tiers add up to exactly what the raw data alone gives.

Where raw snapshots have expired, an edge moves outward to the hour that holds it (to the day
beyond the hourly retention); the plan says which range was really read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from history.public import DAY, HOUR, TABLES, HistoryTable, day_of, month_of, next_month
from readtier import db

HOUR = HOUR
DAY = DAY


class WindowError(ValueError):
    """A window that cannot be read, with what to fix in the message."""


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    def __post_init__(self):
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise WindowError("window edges must be timezone-aware")
        if self.start >= self.end:
            raise WindowError(f"window start {self.start.isoformat()} is not before its end {self.end.isoformat()}")

    @classmethod
    def last(cls, length: timedelta, *, now: datetime | None = None) -> Window:
        end = now or timezone.now()
        return cls(end - length, end)

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    def previous(self) -> Window:
        """The window of the same length just before this one."""
        return Window(self.start - (self.end - self.start), self.start)


def floor_hour(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def ceil_hour(at: datetime) -> datetime:
    f = floor_hour(at)
    return f if f == at else f + HOUR


def ceil_day(at: datetime) -> datetime:
    f = day_of(at)
    return f if f == at else f + DAY


@dataclass(frozen=True)
class Term:
    """+/- the running sums of a statement tier at a boundary (resolved to the latest boundary with
    rows in the same period, which has the same value)."""

    table: HistoryTable
    until: datetime
    since: datetime  # the start of the boundary's period (UTC day or month)
    sign: int


@dataclass
class Coverage:
    """What one server's history holds, to plan reads on."""

    raw_from: datetime | None  # oldest raw snapshot
    hourly_from: datetime | None  # oldest hourly bucket
    hours_boundary: datetime | None  # end of the latest hourly bucket
    hours_built_until: datetime | None  # snapshots before this are in the hourly tier (< boundary: hour in progress)
    days_built_until: datetime | None  # end of the latest daily bucket
    daily_from: datetime | None = None  # oldest daily bucket
    recent_interval_s: float | None = None  # the median interval of the last few snapshots: how often it is collected
    deltas_from: datetime | None = None  # oldest delta snapshot (the oldest snapshot is a baseline: no figures)

    @property
    def data_from(self) -> datetime | None:
        """Where the history begins (None: no history at all): the first snapshot where it is still
        kept, or where the oldest data is a rolled-up bucket, the bucket's start."""
        buckets = [(b, width) for b, width in ((self.hourly_from, HOUR), (self.daily_from, DAY)) if b is not None]
        if self.raw_from is not None and all(self.raw_from < b + width for b, width in buckets):
            return self.raw_from  # the oldest bucket holds no snapshot before it (same UTC day: not expired)
        return min([b for b, _ in buckets] + ([self.raw_from] if self.raw_from is not None else []), default=None)

    @property
    def begins_with_snapshots(self) -> bool:
        """The history begins with its raw snapshots: none has expired, nothing is before the first one."""
        return self.raw_from is not None and self.data_from == self.raw_from

    @property
    def figures_from(self) -> datetime | None:
        """Where the history's first figures are: where it begins, or where it begins with its snapshots, its
        first delta. A baseline taken at 17:59 holds no figures: that history's first hour is 18:00."""
        if self.begins_with_snapshots and self.deltas_from is not None:
            return self.deltas_from
        return self.data_from

    @property
    def complete_hours_until(self) -> datetime | None:
        """End of the latest hour rolled up whole."""
        if self.hours_boundary is None:
            return None
        return self.hours_boundary if self.hours_built_until >= self.hours_boundary else self.hours_boundary - HOUR

    def has_raw(self, at: datetime) -> bool:
        return self.raw_from is not None and self.raw_from <= at

    def snapshots_hold_all_from(self, at: datetime) -> bool:
        """Every figure from `at` on is in the raw snapshots: they reach back to it, or the history begins with
        them (a server added after `at`: nothing before its first snapshot was expired)."""
        return self.has_raw(at) or self.begins_with_snapshots


def coverage(server_id: int) -> Coverage:
    raw_from, deltas_from, hourly_from, last_hour, built_until, first_day, last_day, recent = db.fetchone(
        f"SELECT (SELECT min(taken_at) FROM {TABLES.SNAPSHOT.name} WHERE server_id = %(s)s), "
        f"(SELECT min(taken_at) FROM {TABLES.SNAPSHOT.name} WHERE server_id = %(s)s AND kind = 'delta'), "
        f"(SELECT min(bucket) FROM {TABLES.SERVER_HOURLY.name} WHERE server_id = %(s)s), "
        f"h.bucket, h.built_until, "
        f"(SELECT min(bucket) FROM {TABLES.SERVER_DAILY.name} WHERE server_id = %(s)s), "
        f"(SELECT max(bucket) FROM {TABLES.SERVER_DAILY.name} WHERE server_id = %(s)s), "
        "(SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY interval_s) FROM (SELECT interval_s "
        f"FROM {TABLES.SNAPSHOT.name} WHERE server_id = %(s)s AND kind = 'delta' ORDER BY taken_at DESC LIMIT 5) r) "
        f"FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT bucket, built_until FROM {TABLES.SERVER_HOURLY.name} "
        f"WHERE server_id = %(s)s ORDER BY bucket DESC LIMIT 1) h ON true",
        {"s": server_id},
    )
    return Coverage(
        raw_from=raw_from,
        hourly_from=hourly_from,
        hours_boundary=None if last_hour is None else last_hour + HOUR,
        hours_built_until=built_until,
        days_built_until=None if last_day is None else last_day + DAY,
        daily_from=first_day,
        recent_interval_s=recent,
        deltas_from=deltas_from,
    )


def history_older_than(server_ids: list[int], ages: list[timedelta], *, now: datetime) -> list[bool]:
    """For each age (hours, well within the raw snapshots' retention of days), whether any of the servers has a
    snapshot older than it: what a page of many servers opens on (console.ranges), one EXISTS per age, each
    stopped at its first row. (A rolled-up hour starts before its first snapshot: it would age a history of
    minutes by up to an hour.)"""
    if not server_ids:
        return [False for _ in ages]
    parts, params = [], []
    for age in ages:
        parts.append(f"EXISTS (SELECT 1 FROM {TABLES.SNAPSHOT.name} WHERE server_id = ANY(%s) AND taken_at < %s)")
        params += [server_ids, now - age]
    return list(db.fetchone("SELECT " + ", ".join(f"({p})" for p in parts), params))


@dataclass
class ReadPlan:
    """How to read one window of one server."""

    window: Window
    start: datetime  # what is really read (edges moved outward where raw data has expired)
    end: datetime
    # [a, b) read from raw snapshots, with a sign: an edge may be read as its whole hour from the
    # tier less the raw part outside the window, when that part is the shorter one.
    raw: list[tuple[datetime, datetime, int]] = field(default_factory=list)
    core: tuple[datetime, datetime] | None = None  # hour boundaries [S, E) read from the tiers
    terms: list[Term] = field(default_factory=list)
    resolutions: list[str] = field(default_factory=list)


def plan(window: Window, cov: Coverage) -> ReadPlan:
    start, end = window.start, window.end
    if cov.data_from is None or end <= cov.data_from:
        # Before the server's history begins: nothing to read (widening an edge to its hour or day
        # would bring in data from after the window).
        return ReadPlan(window=window, start=start, end=end)
    if not cov.has_raw(start):
        # Raw data has expired (or never existed) at the start edge: whole hours, or whole days.
        start = floor_hour(start) if cov.hourly_from is not None and start >= cov.hourly_from else day_of(start)
    if not cov.has_raw(end):
        end = ceil_hour(end) if cov.hourly_from is not None and end >= cov.hourly_from else ceil_day(end)
    p = ReadPlan(window=window, start=start, end=end)
    if cov.hours_boundary is None:
        p.raw.append((start, end, +1))
        p.resolutions.append("raw")
        return p
    complete = cov.complete_hours_until
    minus: list[tuple[datetime, datetime, int]] = []
    # Start edge: from the hour boundary after it, or from the one before less the minutes before it.
    s_core = ceil_hour(start)
    before = floor_hour(start)
    if (
        s_core != start
        and cov.has_raw(before)
        and start - before < s_core - start
        and before + HOUR <= complete
        and cov.hourly_from <= before
    ):
        s_core = before
        minus.append((before, start, -1))
    # End edge: up to the hour in progress as far as it is rolled up, or a whole hour less the minutes after.
    if cov.hours_built_until < cov.hours_boundary and end >= cov.hours_built_until:
        e_core, e_read = cov.hours_boundary, cov.hours_built_until
    else:
        e_core = e_read = min(floor_hour(end), complete)
        after = ceil_hour(end)
        if after != end and after <= complete and cov.has_raw(end) and after - end < end - floor_hour(end):
            e_core = e_read = after
            minus.append((end, after, -1))
    if s_core >= e_core:
        p.raw.append((start, end, +1))
        p.resolutions.append("raw")
        return p
    p.raw += minus
    if start < s_core:
        p.raw.append((start, s_core, +1))
    if e_read < end:
        p.raw.append((e_read, end, +1))
    if p.raw:
        p.resolutions.append("raw")
    p.core = (s_core, e_core)
    p.terms = _terms(s_core, e_core, cov.days_built_until)
    for label, table in (("hourly", TABLES.STATEMENT_HOURLY), ("daily", TABLES.STATEMENT_DAILY)):
        if any(t.table is table for t in p.terms):
            p.resolutions.append(label)
    return p


def _terms(s: datetime, e: datetime, days_built_until: datetime | None) -> list[Term]:
    """The prefix-sum terms whose signed sum is each statement's total over [s, e) (hour-aligned)."""
    h, d = TABLES.STATEMENT_HOURLY, TABLES.STATEMENT_DAILY
    day_s, day_e = day_of(s), day_of(e)
    if day_s == day_e:
        terms = [Term(h, e, day_e, +1)]
        if s != day_s:
            terms.append(Term(h, s, day_s, -1))
        return terms
    terms: list[Term] = []
    first_whole = day_s
    if s != day_s:  # the first day from s to its end
        terms += [Term(h, day_s + DAY, day_s, +1), Term(h, s, day_s, -1)]
        first_whole = day_s + DAY
    if e != day_e:  # the last day from its start to e
        terms.append(Term(h, e, day_e, +1))
    # Whole days: from the daily tier where built, within each month; the rest day by day (hourly).
    daily_until = min(day_e, days_built_until) if days_built_until is not None else first_whole
    day = first_whole
    while day < daily_until:
        month = month_of(day)
        upto = min(daily_until, next_month(month))
        terms.append(Term(d, upto, month, +1))
        if day != month:
            terms.append(Term(d, day, month, -1))
        day = upto
    while day < day_e:
        terms.append(Term(h, day + DAY, day, +1))
        day += DAY
    return terms


def hourly_terms(window: Window) -> list[Term]:
    """The hourly tier's terms of an hour-aligned window, day by day (the daily tier left out): what a reader of
    a few hours on each of many days needs. WindowError for a window that does not start and end on the hour."""
    if floor_hour(window.start) != window.start or floor_hour(window.end) != window.end:
        raise WindowError(f"{window.start.isoformat()} to {window.end.isoformat()} is not whole hours")
    return _terms(window.start, window.end, None)


def resolve(server_id: int, terms: list[Term]) -> list[tuple[Term, datetime | None]]:
    """Each term with the latest boundary that has rows at or before its own, in its period (None:
    the statement sums are all zero there). One query for all terms."""
    if not terms:
        return []
    parts = []
    params: list = []
    for t in terms:
        parts.append(f"(SELECT max(until) FROM {t.table.name} WHERE server_id = %s AND until > %s AND until <= %s)")
        params += [server_id, t.since, t.until]
    found = db.fetchone("SELECT " + ", ".join(parts), params)
    return list(zip(terms, found, strict=True))
