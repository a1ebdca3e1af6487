"""bench/plans.py: the four rounds of a benchmark day stand for hours of one UTC day, 6 hours apart, the last
one now, so that each has its own hour's budget and the budget's day sees all of their bytes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.plans import round_hours


def test_the_rounds_stand_for_hours_of_the_same_day_six_hours_apart():
    now = datetime(2026, 12, 1, 20, 41, 7, tzinfo=UTC)
    hours = round_hours(now)
    assert [h.hour for h in hours] == [2, 8, 14, 20]
    assert {h.date() for h in hours} == {now.date()}
    assert all(h.minute == h.second == h.microsecond == 0 for h in hours)


def test_early_in_the_day_the_other_rounds_fall_later_the_same_day():
    hours = round_hours(datetime(2026, 12, 1, 3, 5, tzinfo=UTC))
    assert [h.hour for h in hours] == [9, 15, 21, 3]  # the round running now is the last; the others keep their hours
    assert {h.date() for h in hours} == {datetime(2026, 12, 1).date()}
    assert len(set(hours)) == 4


def test_another_interval_and_count():
    hours = round_hours(datetime(2026, 12, 1, 12, tzinfo=UTC), rounds=3, interval=timedelta(hours=4))
    assert [h.hour for h in hours] == [4, 8, 12]
