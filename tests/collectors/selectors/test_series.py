"""Which resolution a series is drawn at (pure: Coverage objects, no database)."""

from datetime import UTC, datetime, timedelta

from collectors.selectors.series import choose_resolution
from collectors.selectors.windows import Coverage, Window

NOW = datetime(2026, 11, 23, 21, 40, tzinfo=UTC)


def cov(raw_from: datetime, hourly_from: datetime | None, daily_from: datetime | None = None) -> Coverage:
    boundary = NOW.replace(minute=0) + timedelta(hours=1)
    return Coverage(
        raw_from=raw_from,
        hourly_from=hourly_from,
        hours_boundary=boundary,
        hours_built_until=NOW,
        days_built_until=None,
        daily_from=daily_from,
    )


def test_a_long_history_by_the_windows_length():
    c = cov(NOW - timedelta(days=3), NOW - timedelta(days=60), NOW - timedelta(days=400))
    assert choose_resolution(Window.last(timedelta(hours=1), now=NOW), c, None) == "raw"
    assert choose_resolution(Window.last(timedelta(hours=6), now=NOW), c, None) == "raw"
    assert choose_resolution(Window.last(timedelta(hours=24), now=NOW), c, None) == "hourly"
    assert choose_resolution(Window.last(timedelta(days=30), now=NOW), c, None) == "hourly"
    assert choose_resolution(Window.last(timedelta(days=90), now=NOW), c, None) == "daily"
    # Raw expired at the window's start: hours.
    old = Window(NOW - timedelta(days=5), NOW - timedelta(days=5) + timedelta(hours=1))
    assert choose_resolution(old, c, None) == "hourly"


def test_a_history_younger_than_the_window_is_drawn_from_its_snapshots():
    """A server added 40 minutes ago: its first hour has one hourly bucket, which would be one point."""
    c = cov(NOW - timedelta(minutes=40), NOW.replace(minute=0), NOW.replace(hour=0, minute=0))
    for length in (timedelta(hours=1), timedelta(hours=6)):
        assert choose_resolution(Window.last(length, now=NOW), c, None) == "raw"
    for length in (timedelta(hours=24), timedelta(days=7), timedelta(days=30)):
        assert choose_resolution(Window.last(length, now=NOW), c, None) == "hourly"


def test_a_resolution_asked_for_is_kept():
    c = cov(NOW - timedelta(days=3), NOW - timedelta(days=60))
    assert choose_resolution(Window.last(timedelta(hours=1), now=NOW), c, "daily") == "daily"
