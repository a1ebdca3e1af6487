"""A server's totals over a window and how well the window was collected: the figures behind the weekly
report's headline and the audit export's coverage table (the same sums every other selector reads)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from history.public import FailedCollection
from readtier import parts, series, windows
from readtier.parts import PlanningState, ServerTotals
from readtier.server import RecentError
from readtier.windows import Window


@dataclass(frozen=True)
class WindowSummary:
    """A server's sums over a window. Planning is None where it was never tracked (not 0)."""

    window: Window
    snapshots: int
    span_s: float  # seconds covered by the intervals read
    planning: PlanningState
    calls: int
    exec_ms: float
    plan_ms: float | None
    dealloc: int | None  # None: unknown (pg_stat_statements_info needs 14+)
    dealloc_per_s: float | None
    entries_peak: int | None
    entries_max: int | None

    @property
    def db_time_ms(self) -> float:
        """Execution plus (tracked) planning time of every statement."""
        return self.exec_ms + (self.plan_ms or 0.0)

    @property
    def plan_share(self) -> float | None:
        """Planning's share of database time; None where planning was not tracked or nothing ran."""
        if self.plan_ms is None or self.db_time_ms <= 0:
            return None
        return self.plan_ms / self.db_time_ms


def _summary(window: Window, t: ServerTotals) -> WindowSummary:
    return WindowSummary(
        window=window,
        snapshots=t.snapshots,
        span_s=t.span_s,
        planning=t.planning,
        calls=t.get("calls"),
        exec_ms=t.get("exec_us") / 1000,
        plan_ms=t.get("plan_us") / 1000 if t.planning_tracked_s > 0 else None,
        dealloc=t.dealloc,
        dealloc_per_s=t.dealloc_per_s,
        entries_peak=t.entries_peak,
        entries_max=t.entries_max,
    )


def window_summary(*, server_id: int, window: Window) -> WindowSummary:
    """The server's totals over the window, read as every selector reads them (tiers plus raw edges)."""
    return _summary(window, parts.window_totals(server_id, windows.plan(window, windows.coverage(server_id))))


@dataclass(frozen=True)
class Gap:
    start: datetime
    end: datetime

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600


@dataclass(frozen=True)
class CollectionCoverage:
    """How much of a window the history covers, where it has holes, and the collections that failed."""

    window: Window
    history_from: datetime | None  # where the server's history begins (None: none at all)
    expected_s: float  # seconds of the window since the history began
    covered_s: float  # of which outside the gaps
    resolution: str  # the grid the gaps are found on: hourly or daily
    gaps: list[Gap]  # runs of grid points without data, after the history began
    peak_dealloc_per_s: float | None  # the highest point of the grid (None: unknown, before 14)
    errors: list[RecentError]  # failed collections in the window, newest first (the last 50 are kept)
    error_count: int

    @property
    def share(self) -> float | None:
        """Covered / expected, at most 1; None where the window holds no history."""
        return min(1.0, self.covered_s / self.expected_s) if self.expected_s > 0 else None

    @property
    def gap_hours(self) -> float:
        return sum(g.hours for g in self.gaps)


def collection_coverage(*, server_id: int, window: Window, errors_limit: int = 10) -> CollectionCoverage:
    """Coverage, gaps and the collections that failed in the window. Gaps are found on the hourly grid (the
    daily one beyond a month): a gap is an hour in which no snapshot ended. A snapshot taken after an outage
    spans it, so its deltas are whole, but the hours of the outage have no detail: they are the gap."""
    resolution = "hourly" if window.end - window.start <= series.HOURLY_UP_TO else "daily"
    s = series.server_series(server_id=server_id, window=window, resolution=resolution, top_events=0)
    history_from = windows.coverage(server_id).data_from
    since = max(window.start, history_from) if history_from is not None else window.end
    expected_s = max(0.0, (window.end - since).total_seconds())
    gaps: list[Gap] = []
    for p in s.points:
        start, end = max(p.start, since), min(p.end, window.end)
        if p.span_s is not None or end <= start:  # covered, or outside the history's part of the window
            continue
        if gaps and gaps[-1].end >= start:
            gaps[-1] = Gap(gaps[-1].start, end)
        else:
            gaps.append(Gap(start, end))
    # The grid's points overlapping the history's part of the window; none where the window holds no history
    # (an edge bucket may hold snapshots taken after the window's end: they are no rate of this window).
    overlapping = [p for p in s.points if p.end > since and p.start < window.end] if expected_s > 0 else []
    rates = [p.dealloc_per_s for p in overlapping if p.dealloc_per_s is not None]
    errors = FailedCollection.objects.filter(server_id=server_id, at__gte=window.start, at__lt=window.end)
    return CollectionCoverage(
        window=window,
        history_from=history_from,
        expected_s=expected_s,
        covered_s=max(0.0, expected_s - sum((g.end - g.start).total_seconds() for g in gaps)),
        resolution=s.resolution,
        gaps=gaps,
        peak_dealloc_per_s=max(rates) if rates else None,
        errors=[RecentError(e.at, e.error_class, e.message) for e in errors.order_by("-at", "-id")[:errors_limit]],
        error_count=errors.count(),
    )
