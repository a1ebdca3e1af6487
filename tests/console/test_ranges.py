"""The time range of a page, from its URL parameters (pure: no database)."""

import zoneinfo
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from console.ranges import DEFAULT, parse_range

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_presets_and_the_default():
    assert parse_range({}, now=NOW).key == DEFAULT
    r = parse_range({"range": "7d"}, now=NOW)
    assert (r.key, r.window.end, r.window.start, r.error) == ("7d", NOW, NOW - timedelta(days=7), "")
    assert r.params == {"range": "7d"}


def test_custom_ranges_are_local_times_of_the_user():
    with timezone.override(zoneinfo.ZoneInfo("Europe/Paris")):
        r = parse_range({"range": "custom", "start": "2026-11-20T08:00", "end": "2026-11-21T08:30"}, now=NOW)
        assert r.key == "custom" and r.error == ""
        assert r.window.start == datetime(2026, 11, 20, 7, 0, tzinfo=UTC)
        assert r.window.end == datetime(2026, 11, 21, 7, 30, tzinfo=UTC)
        assert r.params == {"range": "custom", "start": "2026-11-20T08:00", "end": "2026-11-21T08:30"}


def test_a_time_with_its_offset_is_read_as_written_in_any_zone():
    """The weekly mail's links carry the report's zone: a reader in New York sees the same week."""
    params = {"range": "custom", "start": "2026-11-16T00:00+01:00", "end": "2026-11-23T00:00+01:00"}
    for zone in ("Europe/Paris", "America/New_York", "UTC"):
        with timezone.override(zoneinfo.ZoneInfo(zone)):
            r = parse_range(params, now=NOW)
            assert r.error == ""
            assert (r.window.start, r.window.end) == (
                datetime(2026, 11, 15, 23, 0, tzinfo=UTC),
                datetime(2026, 11, 22, 23, 0, tzinfo=UTC),
            )


def test_bad_ranges_fall_back_to_the_default_and_say_why():
    cases = {
        "unknown range": {"range": "2w"},
        "not a date": {"range": "custom", "start": "yesterday"},
        "before the end": {"range": "custom", "start": "2026-11-21T08:00", "end": "2026-11-20T08:00"},
        "at most": {"range": "custom", "start": "2024-01-01T00:00", "end": "2026-01-01T00:00"},
    }
    for words, params in cases.items():
        r = parse_range(params, now=NOW)
        assert r.key == DEFAULT and words in r.error, (params, r.error)
