"""presentation/formatting.py: how a figure reads wherever it is shown (pure: no database)."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from collectors.models import TextStatus
from collectors.selectors.parts import NO_DATA, NOT_TRACKED
from presentation import formatting as f


@pytest.mark.parametrize(
    ("per_s", "text"),
    [(None, "unknown"), (0, "0/s"), (0.01234, "0.012/s"), (1.5, "1.50/s"), (12.34, "12.3/s"), (1234.4, "1,234/s")],
)
def test_a_rate_keeps_three_significant_digits_below_100(per_s, text):
    assert f.rate_text(per_s) == text


def test_a_rate_in_a_table_whose_heading_carries_the_unit():
    assert [f.rate_text(v, unit="", missing="–") for v in (None, 0, 0.5)] == ["–", "0", "0.500"]


def test_every_reason_for_a_missing_text_is_said_and_none_is_blank():
    reasons = {status: f.missing_text(status) for status in TextStatus.values if status != TextStatus.STORED}
    assert len(set(reasons.values())) == len(reasons) and all(reasons.values())
    assert f.missing_text("something new") == "<no text>"


@pytest.mark.parametrize(
    ("ms", "text"),
    [(None, "unknown"), (0, "0 ms"), (0.5, "0.50 ms"), (123, "123 ms"), (4200, "4.2 s"), (750_000, "12.5 min")],
)
def test_a_duration_in_the_unit_read_at_a_glance(ms, text):
    assert f.duration_text(ms) == text


def test_planning_not_tracked_is_never_zero():
    assert f.plan_share_text(None, NOT_TRACKED) == NOT_TRACKED
    assert f.plan_share_text(None, NO_DATA) == NO_DATA
    assert f.plan_share_text(0.0, "tracked") == "0%"


def test_changes_and_spans():
    assert [f.change_text(c) for c in (None, 0.001, 0.123, -0.034)] == ["no comparison", "unchanged", "+12%", "-3.4%"]
    paris = ZoneInfo("Europe/Paris")
    start, end = datetime(2026, 11, 17, 2, tzinfo=UTC), datetime(2026, 11, 17, 5, tzinfo=UTC)
    assert f.span_text(start, end, paris) == "Tue 17 Nov 03:00–06:00"
    assert (
        f.week_span_text(datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 23, tzinfo=UTC), UTC)
        == "16–22 Nov 2026"
    )
