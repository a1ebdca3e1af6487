"""coverage: window_summary sums a server's window (planning None where not tracked, deallocations None before
PostgreSQL 14), and collection_coverage says how much of a window since the history began was collected: the hours
in which no snapshot ended are its gaps, with the peak deallocation rate and the failed collections. Shown against
the snapshot times and raw rows of two small histories, PostgreSQL 17 with an outage and PostgreSQL 13."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from bench import synthetic
from collectors.services import server_collect
from collectors.settings import instance
from collectors.statements import pgss
from console.services import server_delete
from history import rollups
from history.models import FailedCollection
from readtier import Window
from readtier.coverage import WindowSummary, collection_coverage, window_summary

pytestmark = pytest.mark.django_db

STEP = timedelta(minutes=10)
START, END = datetime(2026, 6, 13, 8, 5, tzinfo=UTC), datetime(2026, 6, 13, 14, 0, tzinfo=UTC)
OUTAGE = (datetime(2026, 6, 13, 10, 0, tzinfo=UTC), datetime(2026, 6, 13, 12, 0, tzinfo=UTC))


class Versioned(synthetic.SyntheticServer):
    version, dealloc = 170010, 0

    def meta(self) -> instance.ServerMeta:
        return dataclasses.replace(super().meta(), server_version_num=self.version)


def collected(name: str, version: int, outage=None) -> object:
    """Every STEP in [START, END) but in the outage; from 14 on, deallocating 6 × the hour of day a step."""
    server, synth = synthetic.register(name), Versioned(n=5, change_fraction=0.3, start=START, step_s=600, seed=3)
    synth.version = version
    with synthetic.reading_from(synth):
        known = version >= 140000  # pg_stat_statements_info (the monitored side, put back on leaving)
        pgss.read_info = lambda conn, meta: (synth.dealloc, int(synth.stats_since[0])) if known else (None, None)
        synth.step()
        assert server_collect(server_id=server.pk).ok
        while synth.taken_at + STEP < END:
            synth.dealloc += 6 * synth.taken_at.hour
            synth.step()
            if not (outage and outage[0] <= synth.taken_at < outage[1]):
                assert server_collect(server_id=server.pk).ok
    rollups.roll_up(now=END + timedelta(days=1))
    return server


@pytest.fixture(scope="module")
def servers(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        made = collected("coverage-pg17", 170010, OUTAGE), collected("coverage-pg13", 130011)
        yield made
        for s in made:
            server_delete(server=s)


def _raw(server_id: int, window: Window) -> dict:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT date_trunc('hour', taken_at), count(*), sum(interval_s), sum(calls)::int8, sum(exec_us)::int8, "
            "sum(dealloc_delta)::int8, max(entries) FROM collectors_snapshot WHERE server_id = %s AND kind = 'delta' "
            "AND taken_at >= %s AND taken_at < %s GROUP BY 1",
            [server_id, window.start, window.end],
        )
        return {r[0]: r[1:] for r in cur.fetchall()}


def test_a_summary_is_the_raw_sums_with_planning_not_tracked_as_none(servers):
    window = Window(datetime(2026, 6, 13, 7, 0, tzinfo=UTC), datetime(2026, 6, 13, 13, 17, tzinfo=UTC))
    for server in servers:
        hours = _raw(server.pk, window).values()
        s = window_summary(server_id=server.pk, window=window)
        assert (s.snapshots, s.span_s, s.calls) == tuple(sum(h[i] for h in hours) for i in range(3))
        assert s.exec_ms == pytest.approx(sum(h[3] for h in hours) / 1000) and s.db_time_ms == s.exec_ms
        assert (s.planning, s.plan_ms, s.plan_share) == ("not tracked", None, None)
        assert (s.entries_peak, s.entries_max) == (5, 10000)
    pg17, pg13 = (window_summary(server_id=s.pk, window=window) for s in servers)
    dealloc = sum(h[4] for h in _raw(servers[0].pk, window).values())
    assert dealloc > 0 and (pg17.dealloc, pg17.dealloc_per_s) == (dealloc, pytest.approx(dealloc / pg17.span_s))
    assert (pg13.dealloc, pg13.dealloc_per_s) == (None, None)  # unknown before 14, not 0


def test_planning_share_is_of_database_time_and_none_where_nothing_is_known():
    s = WindowSummary(None, 3, 1800.0, "tracked", 10, 75.0, 25.0, None, None, None, None)
    assert (s.db_time_ms, s.plan_share) == (100.0, 0.25)
    assert dataclasses.replace(s, plan_ms=0.0, exec_ms=0.0).plan_share is None
    assert dataclasses.replace(s, plan_ms=None).db_time_ms == 75.0


@pytest.mark.parametrize("end_hour, end_minute", [(14, 0), (11, 30)])
def test_the_gaps_are_the_hours_without_a_snapshot_since_the_history_began(servers, end_hour, end_minute):
    window = Window(datetime(2026, 6, 13, 6, 0, tzinfo=UTC), datetime(2026, 6, 13, end_hour, end_minute, tzinfo=UTC))
    c = collection_coverage(server_id=servers[0].pk, window=window)
    hours = _raw(servers[0].pk, window)
    grid = [START.replace(minute=0) + timedelta(hours=h) for h in range(24)]  # from the hour the history began
    empty = [h for h in grid if h < window.end and h not in hours]
    assert empty == [OUTAGE[0], OUTAGE[0] + timedelta(hours=1)]
    assert [(g.start, g.end) for g in c.gaps] == [(empty[0], min(empty[-1] + timedelta(hours=1), window.end))]
    assert (c.history_from, c.resolution, c.expected_s) == (START, "hourly", (window.end - START).total_seconds())
    assert c.gap_hours == (c.gaps[0].end - c.gaps[0].start).total_seconds() / 3600
    assert c.covered_s == c.expected_s - c.gap_hours * 3600 and c.share == c.covered_s / c.expected_s
    assert c.peak_dealloc_per_s == pytest.approx(max(d / span for _, span, _, _, d, _ in hours.values()))


def test_a_window_before_the_history_or_of_a_server_never_collected_expects_nothing(servers):
    c = collection_coverage(
        server_id=servers[0].pk, window=Window(START - timedelta(days=40), START - timedelta(hours=1))
    )
    assert (c.expected_s, c.covered_s, c.share, c.gaps, c.gap_hours, c.resolution) == (0.0, 0.0, None, [], 0, "daily")
    never = synthetic.register("coverage-never")
    c = collection_coverage(server_id=never.pk, window=Window(START - timedelta(hours=2), END))
    assert (c.history_from, c.expected_s, c.share, c.gaps, c.peak_dealloc_per_s) == (None, 0.0, None, [], None)
    assert collection_coverage(server_id=servers[1].pk, window=Window(START, END)).peak_dealloc_per_s is None  # 13


def test_a_server_never_collected_has_no_gap_whatever_the_windows_end():
    never = synthetic.register("coverage-never-mid-hour")
    assert collection_coverage(server_id=never.pk, window=Window(START, END - timedelta(minutes=30))).gaps == []


def test_a_window_ending_before_the_history_began_has_no_peak_deallocation_rate(servers):
    window = Window(START - timedelta(days=40), START - timedelta(hours=1))  # its last day bucket holds history
    assert collection_coverage(server_id=servers[0].pk, window=window).peak_dealloc_per_s is None


def test_failed_collections_in_the_window_are_counted_and_the_newest_listed(servers):
    sid, window = servers[1].pk, Window(START, END)
    at = [START - timedelta(minutes=1), END, *(START + timedelta(minutes=13 * k) for k in range(12))]
    made = [
        FailedCollection.objects.create(server_id=sid, at=t, error_class="timeout", message=f"m{i}")
        for i, t in enumerate(at)
    ]
    c = collection_coverage(server_id=sid, window=window, errors_limit=10)
    inside = sorted((e for e in made if window.start <= e.at < window.end), key=lambda e: e.at, reverse=True)
    assert c.error_count == 12 and [(e.at, e.message) for e in c.errors] == [(e.at, e.message) for e in inside[:10]]
    assert {e.error_class for e in c.errors} == {"timeout"}
