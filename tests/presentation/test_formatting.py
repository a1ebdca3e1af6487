"""presentation/formatting.py: how a figure reads wherever it is shown (pure: no database)."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from history.models import TextStatus
from presentation import formatting as f
from readtier import PlanningState


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
    assert f.plan_share_text(None, PlanningState.NOT_TRACKED) == f.NOT_TRACKED == "not tracked"
    assert f.plan_share_text(None, PlanningState.NO_DATA) == f.NO_DATA == "no data"
    assert f.plan_share_text(None, PlanningState.PARTLY_TRACKED) == f.UNKNOWN
    assert f.plan_share_text(0.0, PlanningState.TRACKED) == "0%"


def test_changes_and_spans():
    assert [f.change_text(c) for c in (None, 0.001, 0.123, -0.034)] == ["no comparison", "unchanged", "+12%", "-3.4%"]
    paris = ZoneInfo("Europe/Paris")
    start, end = datetime(2026, 11, 17, 2, tzinfo=UTC), datetime(2026, 11, 17, 5, tzinfo=UTC)
    assert f.span_text(start, end, paris) == "Tue 17 Nov 03:00–06:00"
    assert (
        f.week_span_text(datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 23, tzinfo=UTC), UTC)
        == "16–22 Nov 2026"
    )
    # A week so far ends on the day it was cut (a Sunday morning's report covers Sunday's hours too).
    assert f.week_span_text(datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 29, 9, tzinfo=UTC), UTC) == (
        "23–29 Nov 2026"
    )
    assert f.week_span_text(datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 2, 0, tzinfo=UTC), UTC) == (
        "30 Nov–1 Dec 2026"
    )


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [(None, 1, "–"), (0, 0, "0"), (1234567, 0, "1,234,567"), (1234.56, 1, "1,234.6"), (0.125, 2, "0.12")],
)
def test_a_number_in_a_table_has_its_decimals_and_separators_and_a_dash_for_none(value, digits, text):
    assert f.number_text(value, digits) == text


@pytest.mark.parametrize(
    ("ms", "text"),
    [(None, "–"), (0, "0.000"), (0.0424, "0.042"), (0.9994, "0.999"), (1, "1.00"), (3.2, "3.20"), (1234.5, "1,234.50")],
)
def test_milliseconds_in_a_table_keep_three_decimals_below_one(ms, text):
    assert f.ms_number_text(ms) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1,023 B"),
        (1024, "1.0 kB"),
        (3277, "3.2 kB"),
        (12 << 20, "12.0 MB"),
        (3 << 29, "1.5 GB"),
        (1 << 40, "1,024.0 GB"),
    ],
)
def test_bytes_in_the_largest_unit_they_fill(n, text):
    assert f.bytes_text(n) == text
