"""ISO weeks in an organization's time zone: the weekly report covers Monday 00:00 to the next Monday
00:00 there (so a week across a DST change is 167 or 169 hours, as the clock on the wall says)."""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from readtier import Window

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")


class WeekError(ValueError):
    """A week that cannot be read, with what to fix in the message."""


@dataclass(frozen=True)
class ReportWeek:
    year: int
    week: int
    time_zone: str
    # The week so far: its window ends here (a preview before the first whole week; never sent as a report).
    # Its previous week ends as far into that week, so that changes compare the same days and hours.
    until: datetime | None = None

    @property
    def label(self) -> str:
        return f"{self.year}-W{self.week:02d}"

    @property
    def first_day(self) -> date:
        return date.fromisocalendar(self.year, self.week, 1)

    @property
    def window(self) -> Window:
        # In UTC: Python subtracts two times of the same zone by their wall clocks, not across a DST change.
        tz = zoneinfo.ZoneInfo(self.time_zone)
        start = datetime.combine(self.first_day, datetime.min.time(), tz).astimezone(UTC)
        end = datetime.combine(self.first_day + timedelta(days=7), datetime.min.time(), tz).astimezone(UTC)
        return Window(start, min(end, self.until) if self.until is not None else end)

    def previous(self) -> ReportWeek:
        y, w, _ = (self.first_day - timedelta(days=7)).isocalendar()
        until = None if self.until is None else self.until - timedelta(days=7)
        return ReportWeek(y, w, self.time_zone, until)

    def so_far(self, now: datetime) -> ReportWeek:
        """This week up to `now` (a week in progress, previewed)."""
        return ReportWeek(self.year, self.week, self.time_zone, now)


def parse_week(text: str, *, time_zone: str) -> ReportWeek:
    """'2026-W47' -> that ISO week in `time_zone`."""
    m = _WEEK.match(text.strip())
    if not m:
        raise WeekError(f"week {text!r}: write it as an ISO week, e.g. 2026-W47")
    year, week = int(m[1]), int(m[2])
    try:
        date.fromisocalendar(year, week, 1)
    except ValueError:
        raise WeekError(f"week {text!r}: {year} has no ISO week {week}") from None
    return ReportWeek(year, week, time_zone)


def week_of(at: datetime, *, time_zone: str) -> ReportWeek:
    """The ISO week holding `at` in `time_zone`."""
    y, w, _ = at.astimezone(zoneinfo.ZoneInfo(time_zone)).isocalendar()
    return ReportWeek(y, w, time_zone)


def last_complete_week(now: datetime, *, time_zone: str) -> ReportWeek:
    """The week before the one in progress: what Monday's report is about."""
    return week_of(now, time_zone=time_zone).previous()
