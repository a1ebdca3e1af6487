"""Each rule's condition on plain values (no database): a server down only after down_minutes, advice at or above a
severity with its figures and exact change, deallocation sustained rather than a burst, and a regression against
the median of its baseline days, only for a statement with its share of the server's time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from advisor.selectors import RecommendationRow
from alerts.conditions import advisor_open, dealloc_storm, duration, regressions, server_down
from readtier.series import ServerPoint
from readtier.server import ConfigChange
from readtier.statements import StatementTotals

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def _down(status: str, last_success_at: datetime | None, **kw):
    values = {
        "server_id": 7,
        "status": status,
        "last_success_at": last_success_at,
        "registered_at": NOW - timedelta(days=3),
        "failures": 12,
        "error_class": "unreachable",
        "error_message": "connection refused",
        "down_minutes": 10,
        "now": NOW,
    }
    return server_down(**{**values, **kw})


def test_a_server_is_down_once_it_went_down_minutes_without_a_snapshot():
    assert _down("failing", NOW - 9 * MINUTE) is None  # a restart, a blip: not yet
    c = _down("failing", NOW - 25 * MINUTE)
    assert (c.key, c.severity, c.since, c.path) == ("server:7", "critical", NOW - 25 * MINUTE, "/servers/7/")
    assert c.title == "collection failing (unreachable)"
    assert c.summary.startswith("Not collected for 25 min: its last snapshot was at 2026-11-27 11:35 UTC;")
    assert "connection refused" in c.summary and c.figures["minutes_without_snapshot"] == 25
    stale = _down("stale", NOW - timedelta(hours=2), failures=0)
    assert stale.title == "no snapshot (stale)" and "Not collected for 2 h" in stale.summary


def test_a_server_never_collected_counts_from_its_registration_and_ok_or_disabled_ones_are_not_down():
    c = _down("failing", None)
    assert c.since == NOW - timedelta(days=3) and "it never had a snapshot" in c.summary
    for status in ("ok", "disabled", "never collected"):
        assert _down(status, NOW - timedelta(hours=5)) is None


def _recommendation(pk: int, severity: str, **kw) -> RecommendationRow:
    values = {
        "id": pk,
        "server_id": 3,
        "server": "db1",
        "organization_id": 1,
        "organization": "acme",
        "rule": "pgss_max",
        "subject": "server",
        "severity": severity,
        "status": "open",
        "title": "Raise pg_stat_statements.max",
        "explanation": "42.0 deallocations/s over the last hour.",
        "change_text": "ALTER SYSTEM SET pg_stat_statements.max = 20000;",
        "change_apply": "restart",
        "effect": "",
        "cost": "",
        "evidence": [
            {"label": "deallocations", "unit": "dealloc/s", "points": [["t1", 40.0], ["t2", 42.0], ["t3", None]]}
        ],
        "references": [],
        "first_seen_at": NOW - timedelta(hours=3),
        "opened_at": NOW - timedelta(hours=2),
        "last_seen_at": NOW,
        "acknowledged_at": None,
        "acknowledged_by": None,
        "resolved_at": None,
        "resolved_by": None,
        "times_opened": 1,
    }
    return RecommendationRow(**{**values, **kw})


def test_advice_at_or_above_the_severity_with_its_latest_figures_and_exact_change():
    rows = [_recommendation(1, "critical"), _recommendation(2, "warning"), _recommendation(3, "info")]
    assert [c.key for c in advisor_open(rows=rows, min_severity="critical")] == ["recommendation:1"]
    assert [c.key for c in advisor_open(rows=rows, min_severity="warning")] == ["recommendation:1", "recommendation:2"]
    (c,) = advisor_open(rows=rows[:1], min_severity="critical")
    assert c.change_text == "ALTER SYSTEM SET pg_stat_statements.max = 20000; (needs a server restart)"
    assert c.figures == {"deallocations (dealloc/s)": 42.0}  # the latest known point
    assert c.summary.startswith("Since 2026-11-27 10:00 UTC: 42.0 deallocations/s")
    assert c.summary.endswith("Change: ALTER SYSTEM SET pg_stat_statements.max = 20000; (needs a server restart)")
    assert (c.path, c.since, c.title) == ("/advisor/recommendations/1/", NOW - timedelta(hours=2), rows[0].title)


def _points(rates: list[float | None], *, step_s: float = 60.0) -> list[ServerPoint]:
    start = NOW - len(rates) * timedelta(seconds=step_s)
    out = []
    for i, rate in enumerate(rates):
        a = start + i * timedelta(seconds=step_s)
        out.append(
            ServerPoint(
                a, a + timedelta(seconds=step_s), step_s, "not tracked", 10.0, 5.0, None, rate, 900, 5000, 0.99, {}
            )
        )
    return out


def test_deallocation_sustained_over_most_of_the_window_alerts_and_a_burst_does_not():
    window = 15 * MINUTE
    sustained = dealloc_storm(server_id=3, points=_points([0.0] * 5 + [15.0] * 10), rate_per_s=10, window=window)
    assert sustained.figures["share_above"] == 0.667 and sustained.severity == "critical"
    assert sustained.figures["dealloc_per_s"] == pytest.approx(10.0) and sustained.since == NOW - 10 * MINUTE
    burst = [0.0] * 14 + [1000.0]  # averages 66/s over the window
    assert dealloc_storm(server_id=3, points=_points(burst), rate_per_s=10, window=window) is None
    below = dealloc_storm(server_id=3, points=_points([2.0] * 15), rate_per_s=1, window=window)
    assert below.severity == "warning"  # over the rule's rate, under the advisor's critical one


def test_deallocation_unknown_or_barely_collected_is_no_storm():
    window = 15 * MINUTE
    assert dealloc_storm(server_id=3, points=_points([None] * 15), rate_per_s=10, window=window) is None  # 13
    assert dealloc_storm(server_id=3, points=_points([50.0] * 5), rate_per_s=10, window=window) is None  # 5 of 15
    assert dealloc_storm(server_id=3, points=[], rate_per_s=10, window=window) is None


def _statement(sid: int, *, calls: int, total_ms: float, query: str = "SELECT 1") -> StatementTotals:
    return StatementTotals(
        statement_id=sid,
        queryid=sid * 100,
        database="app",
        user="web",
        toplevel=True,
        query=query,
        text_status="stored",
        calls=calls,
        plans=None,
        exec_ms=total_ms,
        plan_ms=None,
        rows=calls,
        shared_blks_hit=0,
        shared_blks_read=0,
        temp_blks=0,
        io_ms=0.0,
        wal_bytes=0,
    )


def _regressions(current, baselines, changes=(), **kw):
    values = {
        "server_id": 3,
        "current": current,
        "server_total_ms": 10_000.0,
        "baselines": baselines,
        "factor": 2.0,
        "min_share": 0.05,
        "min_days": 2,
        "changes": list(changes),
        "baseline_from": NOW - timedelta(days=7),
        "now": NOW,
    }
    return regressions(**{**values, **kw})


def test_a_regression_is_against_the_median_of_its_days_and_names_the_changes():
    hot = _statement(1, calls=1000, total_ms=3000.0)  # 3 ms a call, 30% of the server's time
    change = ConfigChange(NOW - timedelta(days=1), "pg_stat_statements.track_planning", "off", "on")
    (c,) = _regressions([hot], {1: [1.0, 1.2, 40.0]}, [change])  # one odd day in the baseline: the median is 1.2
    assert c.key == "statement:1" and c.figures["baseline_ms"] == 1.2 and c.figures["ratio"] == 2.5
    assert c.title == "a statement 2.5× slower than usual" and c.path == "/statements/1/"
    assert c.config_changes == (
        {
            "at": "2026-11-26T12:00:00+00:00",
            "setting": "pg_stat_statements.track_planning",
            "before": "off",
            "after": "on",
        },
    )
    assert "30% of the server's time" in c.summary
    assert c.summary.endswith("pg_stat_statements.track_planning off → on at 2026-11-26 12:00 UTC.")
    assert _regressions([hot], {1: [1.6, 1.5]}) == []  # 3 ms against 1.55: under twice
    assert "No configuration change since 2026-11-20 12:00 UTC." in _regressions([hot], {1: [1.0, 1.0]})[0].summary


def test_a_rare_statement_or_one_without_enough_baseline_is_never_a_regression():
    rare = _statement(2, calls=2, total_ms=400.0)  # 200 ms a call, 100 times slower, but 4% of the time
    assert _regressions([rare], {2: [2.0, 2.0, 2.0]}) == []
    assert len(_regressions([rare], {2: [2.0, 2.0, 2.0]}, min_share=0.04)) == 1
    hot = _statement(1, calls=1000, total_ms=3000.0)
    assert _regressions([hot], {1: [1.0]}) == []  # one day of baseline where two are needed
    assert _regressions([hot], {}) == []  # new this hour: nothing to compare with
    assert _regressions([hot], {1: [1.0, 1.0]}, server_total_ms=0.0) == []


def test_a_long_statement_text_is_cut_in_the_message():
    hot = _statement(1, calls=10, total_ms=3000.0, query="SELECT " + "x, " * 200 + "y FROM t")
    (c,) = _regressions([hot], {1: [1.0, 1.0]})
    assert "SELECT x, x," in c.summary and "y FROM t" not in c.summary and "…" in c.summary


def test_durations_read_as_people_say_them():
    assert [duration(timedelta(minutes=m)) for m in (0, 25, 60, 185, 1440, 1500)] == [
        "0 min",
        "25 min",
        "1 h",
        "3 h 5 min",
        "1 d",
        "1 d 1 h",
    ]
