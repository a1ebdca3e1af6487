"""advisor.evidence: what the rules may read of one server, with None for "not known"; the defaults are those of
PostgreSQL's pg_stat_statements, and a statement's plan share is its planning part of exec + plan time."""

from dataclasses import FrozenInstanceError

import pytest

from advisor.evidence import Evidence, Settings, StatementFact
from advisor.thresholds import PSS_MAX_DEFAULT


def test_the_default_settings_are_pg_stat_statements_own():
    s = Settings()
    assert (s.max, s.track, s.track_utility, s.track_planning, s.save) == (PSS_MAX_DEFAULT, "top", True, False, True)
    assert s.sample_rate is None  # no community release has the GUC


@pytest.mark.parametrize(
    "exec_ms, plan_ms, share",
    [
        (400.0, 600.0, 0.6),
        (1.0, 0.0, 0.0),
        (0.0, 3.0, 1.0),
        (0.0, 0.0, 0.0),  # nothing measured: no share, not a division by zero
    ],
)
def test_plan_share_is_planning_over_the_whole_time(exec_ms, plan_ms, share):
    fact = StatementFact(queryid=1, query="SELECT 1", total_exec_ms=exec_ms, total_plan_ms=plan_ms)
    assert fact.plan_share == pytest.approx(share)


def test_unknown_is_none_not_zero():
    e = Evidence(server="s1", version=13)
    unknown = (e.cpu_count, e.dealloc_per_s, e.distinct_keys_1d, e.entries_peak, e.hottest_calls_per_s)
    assert unknown == (None, None, None, None, None)
    assert (e.lwlock_pgss_share, e.spindelay_share, e.mean_query_len) == (None, None, None)
    assert e.sees_all_statements and e.statements == () and e.stats_resets == ()


def test_each_evidence_has_its_own_settings_and_none_can_be_changed():
    a, b = Evidence(server="a", version=16), Evidence(server="b", version=16, settings=Settings(max=10000))
    assert a.settings == Settings() and b.settings.max == 10000
    with pytest.raises(FrozenInstanceError):
        a.settings.max = 1  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        a.cpu_count = 8  # type: ignore[misc]
