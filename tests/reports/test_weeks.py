"""reports.weeks: an ISO week read from its label, or found from an instant, in an organization's time zone; it
runs from Monday 00:00 to the next Monday 00:00 on that zone's wall clock, whatever the offset does meanwhile."""

from datetime import UTC, datetime, timedelta

import pytest

from readtier.windows import Window
from reports.weeks import ReportWeek, WeekError, last_complete_week, parse_week, week_of


def test_a_label_reads_with_spaces_around_it():
    w = parse_week("  2020-W53\n", time_zone="UTC")  # 2020 had 53 ISO weeks
    assert (w.year, w.week, w.label, w.first_day.isoformat()) == (2020, 53, "2020-W53", "2020-12-28")
    assert w.window == Window(datetime(2020, 12, 28, tzinfo=UTC), datetime(2021, 1, 4, tzinfo=UTC))


@pytest.mark.parametrize("text", ["2026-W7", "2026-w47", "2026W47", "26-W47", "2026-W47-1", "", "2026-11-16"])
def test_what_is_not_an_iso_week_label_says_how_to_write_one(text):
    with pytest.raises(WeekError, match=r"write it as an ISO week, e\.g\. 2026-W47") as caught:
        parse_week(text, time_zone="UTC")
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize("text, year, week", [("2021-W53", 2021, 53), ("2026-W00", 2026, 0)])
def test_a_week_the_year_does_not_have_is_named(text, year, week):
    with pytest.raises(WeekError, match=f"{year} has no ISO week {week}$"):
        parse_week(text, time_zone="UTC")


def test_the_week_dst_begins_in_new_york_is_167_hours():
    """8 March 2026: clocks go from 02:00 EST to 03:00 EDT; Monday 00:00 is 05:00 UTC before, 04:00 UTC after."""
    w = parse_week("2026-W10", time_zone="America/New_York")
    assert w.window == Window(datetime(2026, 3, 2, 5, tzinfo=UTC), datetime(2026, 3, 9, 4, tzinfo=UTC))
    assert w.window.seconds == 167 * 3600
    assert w.previous().window.seconds == 168 * 3600 and w.previous().window.end == w.window.start


def test_one_instant_is_in_different_weeks_in_different_zones():
    at = datetime(2026, 11, 22, 23, 30, tzinfo=UTC)  # Sunday in UTC and New York, Monday 00:30 in Paris
    assert week_of(at, time_zone="UTC").label == "2026-W47"
    assert week_of(at, time_zone="America/New_York").label == "2026-W47"
    assert week_of(at, time_zone="Europe/Paris").label == "2026-W48"
    for zone in ("UTC", "America/New_York", "Europe/Paris", "Asia/Kolkata"):
        w = week_of(at, time_zone=zone)
        assert w.time_zone == zone and w.window.start <= at < w.window.end


def test_the_days_after_new_year_can_belong_to_the_last_years_week():
    assert week_of(datetime(2027, 1, 2, 12, tzinfo=UTC), time_zone="UTC").label == "2026-W53"
    assert week_of(datetime(2027, 1, 4, 0, tzinfo=UTC), time_zone="UTC").label == "2027-W01"


def test_the_last_complete_week_depends_on_the_zones_monday():
    now = datetime(2026, 11, 22, 23, 30, tzinfo=UTC)
    paris = last_complete_week(now, time_zone="Europe/Paris")
    utc = last_complete_week(now, time_zone="UTC")
    assert (paris.label, utc.label) == ("2026-W47", "2026-W46")
    for w in (paris, utc):
        assert w.window.end <= now and now - w.window.end < timedelta(days=7)


def test_a_week_so_far_ends_now_and_its_previous_week_as_far_into_it():
    now = datetime(2026, 11, 18, 15, 45, tzinfo=UTC)  # Wednesday
    w = week_of(now, time_zone="UTC").so_far(now)
    assert w.window == Window(datetime(2026, 11, 16, tzinfo=UTC), now)
    assert w.previous() == ReportWeek(2026, 46, "UTC", now - timedelta(days=7))
    assert w.previous().window == Window(datetime(2026, 11, 9, tzinfo=UTC), now - timedelta(days=7))
