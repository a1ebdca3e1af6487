"""The weekly report's figures against ground truth read from the raw snapshots of a known history."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from advisor.models import Recommendation, RecommendationEvent
from history.columns import TOTAL_NAMES
from readtier.coverage import collection_coverage, window_summary
from reports.digest import organization_digest
from reports.weeks import WeekError, last_complete_week, parse_week
from tests.history_world import raw_sums

pytestmark = pytest.mark.django_db

CALLS, EXEC_US = TOTAL_NAMES.index("calls"), TOTAL_NAMES.index("exec_us")


def test_week_summary_equals_the_raw_sums(known_history):
    window = known_history.week.window
    sums, n = raw_sums(known_history.server.pk, window.start, window.end)
    summary = window_summary(server_id=known_history.server.pk, window=window)
    total = sum(sums.values(), np.zeros(len(TOTAL_NAMES), np.int64))
    assert summary.snapshots == n
    assert summary.calls == total[CALLS]
    assert summary.exec_ms == pytest.approx(total[EXEC_US] / 1000)


def test_coverage_finds_the_outage_and_nothing_else(known_history):
    window = known_history.week.window
    cov = collection_coverage(server_id=known_history.server.pk, window=window)
    assert cov.resolution == "hourly"
    # The snapshots at :00 and :30 of each outage hour are missing, so those three hours had none.
    assert [(g.start, g.end) for g in cov.gaps] == [known_history.outage]
    assert cov.gap_hours == 3
    assert cov.expected_s == window.seconds
    assert cov.share == pytest.approx(1 - 3 / (7 * 24))


def test_digest_top_statements_and_changes_match_the_raw_sums(known_history):
    week = known_history.week
    digest = organization_digest(organization_id=known_history.organization.pk, week=week)
    assert [s.name for s in digest.servers] == ["rep-main"]  # not the other organization's
    d = digest.servers[0]
    now, _ = raw_sums(known_history.server.pk, week.window.start, week.window.end)
    before, _ = raw_sums(known_history.server.pk, week.previous().window.start, week.previous().window.end)
    by_total = sorted(now, key=lambda sid: (-int(now[sid][EXEC_US]), sid))[:10]
    assert [c.statement_id for c in d.top] == by_total
    for c in d.top:
        assert c.current.calls == now[c.statement_id][CALLS]
        if c.statement_id in before:
            assert c.previous.calls == before[c.statement_id][CALLS]
            assert c.change("total_ms") == pytest.approx(
                now[c.statement_id][EXEC_US] / before[c.statement_id][EXEC_US] - 1
            )
    assert d.week.calls == sum(int(v[CALLS]) for v in now.values())
    assert d.previous.calls == sum(int(v[CALLS]) for v in before.values())
    assert d.calls_change == pytest.approx(d.week.calls / d.previous.calls - 1)
    assert d.week.planning == "not tracked" and d.week.plan_ms is None and d.week.plan_share is None
    assert {n.statement_id for n in d.new} <= set(now) - set(before)
    assert d.new_count == len(set(now) - set(before))
    assert len(d.series.points) == 7 * 24 and d.series.resolution == "hourly"
    assert d.coverage.gaps and digest.with_gaps == [d]


def test_recommendations_opened_and_resolved_in_the_week(known_history):
    week, server = known_history.week, known_history.server
    inside, outside = week.window.start + timedelta(days=1), week.window.start - timedelta(days=1)
    rec = Recommendation.objects.create(
        server=server,
        rule="pgss_max",
        subject="server",
        subject_key="k",
        severity="critical",
        title="Raise max",
        explanation="x",
        first_seen_at=outside,
        opened_at=outside,
        last_seen_at=inside,
    )
    for at, kind in (
        (outside, "opened"),
        (inside, "cleared"),
        (inside + timedelta(hours=2), "reopened"),
        (inside + timedelta(hours=3), "acknowledged"),
    ):
        RecommendationEvent.objects.create(recommendation=rec, at=at, kind=kind, severity="critical")
    digest = organization_digest(organization_id=known_history.organization.pk, week=week)
    d = digest.servers[0]
    assert [(a.kind, a.at) for a in d.activity] == [("resolved", inside), ("opened", inside + timedelta(hours=2))]
    assert (digest.opened, digest.resolved) == (1, 1)


def test_weeks_parse_and_say_what_to_fix():
    w = parse_week("2026-W47", time_zone="Europe/Paris")
    assert (w.window.start.isoformat(), w.window.end.isoformat()) == (
        "2026-11-15T23:00:00+00:00",
        "2026-11-22T23:00:00+00:00",
    )
    assert w.previous().label == "2026-W46" and parse_week("2027-W01", time_zone="UTC").previous().label == "2026-W53"
    with pytest.raises(WeekError, match="ISO week, e.g. 2026-W47"):
        parse_week("47", time_zone="UTC")
    with pytest.raises(WeekError, match="has no ISO week 54"):
        parse_week("2026-W54", time_zone="UTC")
    # The week across the end of daylight saving time in Paris (25 October 2026) is 169 hours long.
    assert parse_week("2026-W43", time_zone="Europe/Paris").window.seconds == 169 * 3600
    assert parse_week("2026-W44", time_zone="Europe/Paris").window.seconds == 168 * 3600
    from datetime import UTC, datetime

    assert last_complete_week(datetime(2026, 11, 23, 6, 30, tzinfo=UTC), time_zone="Europe/Paris").label == "2026-W47"
