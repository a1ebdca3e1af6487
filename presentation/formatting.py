"""How the console's pages, the weekly mail and the audit PDF write a figure: every number with its unit,
changes as signed percentages, planning that was not tracked as "not tracked" (never 0 ms), and a statement
without a text as why it has none (never a blank). The tests format the selectors' figures with these same
functions and look for the result on the page, in the mail and in the PDF."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

from history.public import TextStatus
from readtier import PlanningState

UNKNOWN = "unknown"
NO_DATA = PlanningState.NO_DATA.value  # a figure of a range without history
NOT_TRACKED = PlanningState.NOT_TRACKED.value  # a planning figure while track_planning was off (never 0 ms)
DASH = "–"  # a table's cell without a figure
# Why a statement has no text, where its text would be (the statement's page explains it at length).
MISSING_TEXT = {
    TextStatus.NOT_VISIBLE: "<text not visible to this role>",
    TextStatus.EVICTED: "<evicted before its text could be read>",
    TextStatus.UNAVAILABLE: "<text not kept by pg_stat_statements>",
    TextStatus.PENDING: "<text not read yet: the next snapshot reads it>",
}


def missing_text(text_status: str) -> str:
    return MISSING_TEXT.get(text_status, "<no text>")


def duration_text(ms: float | None) -> str:
    """123 ms, 4.2 s, 12.5 min, 3.1 h: the unit a reader takes in at a glance."""
    if ms is None:
        return UNKNOWN
    if ms == 0:
        return "0 ms"
    if ms < 1:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def mean_text(ms: float | None) -> str:
    """A mean time per call: milliseconds with a precision that fits (0.042 ms, 3.2 ms, 150 ms)."""
    if ms is None:
        return UNKNOWN
    if ms < 0.1:
        return f"{ms:.3f} ms"
    if ms < 10:
        return f"{ms:.2f} ms"
    return duration_text(ms)


def count_text(n: int | None) -> str:
    """1,234,567 (every digit: a count is read exactly)."""
    return UNKNOWN if n is None else f"{n:,}"


def number_text(value: float | None, digits: int) -> str:
    """1,234.5: `digits` decimals, thousands separated, no unit (a table's heading carries it); a dash for none."""
    return DASH if value is None else f"{value:,.{digits}f}"


def ms_number_text(ms: float | None) -> str:
    """Milliseconds under a heading that says so: 3 decimals below 1 ms (0.042), 2 from there on (1,234.50)."""
    return number_text(ms, 3 if ms is not None and abs(ms) < 1 else 2)


def bytes_text(n: int) -> str:
    """512 B, 3.2 kB, 12.0 MB, 1.5 GB (multiples of 1,024)."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,} B"


def calls_text(n: int) -> str:
    return f"{n:,} call{'' if n == 1 else 's'}"


def rate_text(per_s: float | None, unit: str = "/s", *, missing: str = UNKNOWN) -> str:
    """A rate with as many digits as it needs to be read (3 significant ones at most below 100)."""
    if per_s is None:
        return missing
    if per_s == 0:
        return f"0{unit}"
    size = abs(per_s)
    digits = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 1 else 3
    return f"{per_s:,.{digits}f}{unit}"


def change_text(change: float | None) -> str:
    """+12%, -3%, or "no comparison" where the previous week had nothing to compare with."""
    if change is None:
        return "no comparison"
    percent = change * 100
    if abs(percent) < 0.5:
        return "unchanged"
    digits = 0 if abs(percent) >= 10 else 1
    return f"{percent:+.{digits}f}%"


def share_text(share: float | None) -> str:
    if share is None:
        return UNKNOWN
    percent = share * 100
    return f"{percent:.0f}%" if percent >= 10 or percent == 0 else f"{percent:.1f}%"


def plan_share_text(share: float | None, planning: PlanningState) -> str:
    """Planning's share of database time, or "not tracked" where track_planning was off (never 0)."""
    if share is None:
        if planning in (PlanningState.NOT_TRACKED, PlanningState.NO_DATA):
            return planning.value
        return UNKNOWN
    return share_text(share)


def hours_text(hours: float) -> str:
    return f"{hours:.0f} h" if hours == int(hours) else f"{hours:.1f} h"


def sessions_text(active_sessions: float | None) -> str:
    """Average active sessions."""
    if active_sessions is None:
        return UNKNOWN
    return f"{active_sessions:.2f}" if active_sessions < 10 else f"{active_sessions:.1f}"


def span_text(start: datetime, end: datetime, tz: tzinfo) -> str:
    """Tue 18 Nov 03:00–06:00, or across days Tue 18 Nov 23:00 – Wed 19 Nov 02:00, in the report's zone."""
    a, b = start.astimezone(tz), end.astimezone(tz)
    if a.date() == b.date() or (b - a).total_seconds() <= 86400 and b.hour == 0 and b.minute == 0:
        return f"{a:%a %-d %b %H:%M}–{b:%H:%M}"
    return f"{a:%a %-d %b %H:%M} – {b:%a %-d %b %H:%M}"


def when_text(at: datetime, tz: tzinfo) -> str:
    return f"{at.astimezone(tz):%a %-d %b %H:%M}"


def week_span_text(start: datetime, end: datetime, tz: tzinfo) -> str:
    """16–22 Nov 2026: the days `start` to `end` (exclusive) touch; a whole week's last day is the one before
    the next Monday, a week so far's is the day it ends in."""
    a = start.astimezone(tz)
    last = (end.astimezone(tz) - timedelta(microseconds=1)).date()
    if a.month == last.month:
        return f"{a.day}–{last.day} {last:%b %Y}"
    if a.year == last.year:
        return f"{a:%-d %b}–{last:%-d %b %Y}"
    return f"{a:%-d %b %Y}–{last:%-d %b %Y}"


def shorten(text: str, limit: int) -> str:
    """One line of at most `limit` characters (whitespace folded), with … where it was cut."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1].rstrip() + "…"
