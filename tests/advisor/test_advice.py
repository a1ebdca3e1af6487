"""advisor.advice: a rule's output as plain data — evidence series that keep each point's end only when every
point has one, what a change changes (an ALTER SYSTEM line's setting, whatever its value), and the dedup key."""

from dataclasses import FrozenInstanceError
from datetime import UTC, datetime, timedelta

import pytest

from advisor.advice import SEVERITY_ORDER, Advice, Change, EvidenceSeries, change_target

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
T1, T2 = T0 + timedelta(minutes=5), T0 + timedelta(minutes=10)


def test_a_series_of_pairs_has_no_ends():
    s = EvidenceSeries.of("deallocations", "dealloc/s", [(T0, 1.5), (T1, None)])
    assert (s.label, s.unit, s.points, s.ends) == ("deallocations", "dealloc/s", ((T0, 1.5), (T1, None)), ())


def test_a_series_of_triples_keeps_each_points_end():
    s = EvidenceSeries.of("entries", "entries", [(T0, 10.0, T1), (T1, None, T2)])
    assert s.points == ((T0, 10.0), (T1, None))
    assert s.ends == (T1, T2)


def test_ends_are_dropped_when_one_point_lacks_its_end():
    """A chart cannot draw spans for some points only: a mixed series is read as pairs."""
    s = EvidenceSeries.of("calls", "calls/s", [(T0, 1.0, T1), (T1, 2.0)])
    assert s.points == ((T0, 1.0), (T1, 2.0)) and s.ends == ()


def test_an_empty_series_is_empty():
    s = EvidenceSeries.of("x", "u", [])
    assert s.points == () and s.ends == ()


@pytest.mark.parametrize(
    "text, target",
    [
        ("ALTER SYSTEM SET pg_stat_statements.max = 10000;", "setting pg_stat_statements.max"),
        ("ALTER SYSTEM SET pg_stat_statements.max = 20000;", "setting pg_stat_statements.max"),
        ("alter system set PG_STAT_STATEMENTS.Track TO 'all';", "setting pg_stat_statements.track"),
        ("  ALTER SYSTEM SET work_mem='64MB';", "setting work_mem"),
        ("GRANT pg_read_all_stats TO pgconsole;\n", "GRANT pg_read_all_stats TO pgconsole;"),
        ("ALTER SYSTEM RESET pg_stat_statements.max;", "ALTER SYSTEM RESET pg_stat_statements.max;"),
        ("-- SET pg_stat_statements.track = 'top';", "-- SET pg_stat_statements.track = 'top';"),
    ],
)
def test_change_target_is_the_setting_of_an_alter_system_line_else_the_text(text, target):
    assert change_target(text) == target


def test_two_values_of_one_setting_are_the_same_change():
    assert change_target("ALTER SYSTEM SET pg_stat_statements.track_planning = on;") == change_target(
        "ALTER SYSTEM SET pg_stat_statements.track_planning TO off;"
    )


def test_the_key_is_server_rule_subject_and_nothing_else():
    a = Advice("max", "warning", "s1", "pg_stat_statements.max", "Raise max", "why", Change("x", "restart"))
    b = Advice("max", "critical", "s1", "pg_stat_statements.max", "Other title", "other", None)
    assert a.key == b.key == ("s1", "max", "pg_stat_statements.max")
    assert Advice("max", "warning", "s2", "pg_stat_statements.max", "t", "e").key != a.key
    with pytest.raises(FrozenInstanceError):
        a.severity = "info"  # type: ignore[misc]


def test_severities_rank_info_below_warning_below_critical():
    assert sorted(SEVERITY_ORDER, key=SEVERITY_ORDER.get) == ["info", "warning", "critical"]
