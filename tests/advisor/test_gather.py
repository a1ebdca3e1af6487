"""gather.server_evidence: what the rules read about a server as of `now`, only from the selectors, with notes
saying what the evidence lacks. Its rates, shares, counts and durations are checked here against sums computed
independently from the raw snapshots of small histories built here (PostgreSQL 17 deallocating and waiting on
pg_stat_statements' lock, PostgreSQL 13 without pg_stat_statements_info) and of a server never collected."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from advisor.gather import NO_SNAPSHOT, server_evidence, windows
from bench import synthetic
from collectors.services import server_collect
from collectors.settings import instance
from collectors.statements import pgss
from collectors.waits import waits
from console.services import server_delete
from history import rollups
from history.models import ServerState, Statement
from tests.history_world import raw_sums

pytestmark = pytest.mark.django_db

N, STEP = 6, timedelta(minutes=10)
START, NOW = datetime(2026, 6, 15, 7, 5, tzinfo=UTC), datetime(2026, 6, 15, 11, 0, tzinfo=UTC)


class Contended(synthetic.SyntheticServer):
    version, dealloc = 170010, 0

    def meta(self) -> instance.ServerMeta:
        return dataclasses.replace(super().meta(), server_version_num=self.version)

    def _sample_waits(self) -> waits.WaitReading:
        reading = super()._sample_waits()
        reading.counts[("LWLock", "pg_stat_statements", int(self.hot_queryids[0]))] = 4
        return reading


def collected(name: str, version: int, start: datetime) -> object:
    server, synth = synthetic.register(name), Contended(n=N, change_fraction=0.3, start=start, step_s=600, seed=2)
    synth.version = version
    with synthetic.reading_from(synth):
        info = (lambda: (synth.dealloc, int(synth.stats_since[0]))) if version >= 140000 else (lambda: (None, None))
        pgss.read_info = lambda conn, meta: info()
        synth.step()
        assert server_collect(server_id=server.pk).ok
        while synth.taken_at + STEP < NOW:
            synth.dealloc += synth.taken_at.minute // 10 * 7  # 0 to 35 a step: a rate that varies
            synth.step()
            assert server_collect(server_id=server.pk).ok
    rollups.roll_up(now=NOW)
    return server


@pytest.fixture(scope="module")
def servers(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        made = (
            collected("gather-pg17", 170010, START),
            collected("gather-pg13", 130011, NOW - timedelta(hours=1, minutes=35)),
        )
        yield made
        for s in made:
            server_delete(server=s)


def _raw(sql: str, server_id: int, since: datetime) -> tuple:
    with connection.cursor() as cur:
        cur.execute(sql, {"s": server_id, "a": since, "b": NOW})
        return cur.fetchone()


def test_rates_shares_and_counts_are_those_of_the_raw_snapshots(servers):
    server = servers[0]
    gathered = server_evidence(server=server, now=NOW)
    ev = gathered.evidence
    for name, length in {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}.items():
        dealloc, span = _raw(
            "SELECT sum(dealloc_delta), sum(interval_s) FROM collectors_snapshot WHERE server_id = %(s)s "
            "AND kind = 'delta' AND taken_at >= %(a)s AND taken_at < %(b)s",
            server.pk,
            NOW - length,
        )
        assert ev.dealloc_per_s[name] == pytest.approx(float(dealloc) / span), name
    lock, total = _raw(
        "SELECT sum(session_s) FILTER (WHERE event_type = 'LWLock' AND event = 'pg_stat_statements'), sum(session_s) "
        "FROM collectors_wait_event WHERE server_id = %(s)s AND taken_at >= %(a)s AND taken_at < %(b)s",
        server.pk,
        NOW - timedelta(days=1),
    )
    assert 0 < ev.lwlock_pgss_share == pytest.approx(lock / total) and ev.spindelay_share == 0.0
    day, _ = raw_sums(server.pk, NOW - timedelta(days=1), NOW)
    hottest = max(day, key=lambda sid: day[sid][0])
    assert (ev.version, ev.distinct_keys_1d, ev.distinct_keys_7d, ev.entries_peak) == (17, len(day), len(day), N)
    assert ev.hottest_queryid == Statement.objects.get(pk=hottest).queryid
    assert ev.server_db_time_ms == pytest.approx(sum(v[2] for v in day.values()) / 1000)
    assert ev.keys_disappeared_1d == 0 and ev.stats_resets == (START - timedelta(days=1),)  # the baseline's
    assert ev.sees_all_statements and not gathered.partial and ev.dealloc_series and ev.spindelay_series


def test_the_shortest_window_is_the_last_hour_unless_shortened(servers, settings):
    assert windows() == {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}
    settings.ADVISOR_SHORT_WINDOW_S = 20 * 60  # as a test shortens it: the rates over the last 20 minutes
    assert windows() == {"20min": timedelta(minutes=20), "24h": timedelta(days=1), "7d": timedelta(days=7)}
    server = servers[0]
    ev = server_evidence(server=server, now=NOW).evidence
    dealloc, span = _raw(
        "SELECT sum(dealloc_delta), sum(interval_s) FROM collectors_snapshot WHERE server_id = %(s)s "
        "AND kind = 'delta' AND taken_at >= %(a)s AND taken_at < %(b)s",
        server.pk,
        NOW - timedelta(minutes=20),
    )
    assert list(ev.dealloc_per_s) == ["20min", "24h", "7d"]
    assert ev.dealloc_per_s["20min"] == pytest.approx(float(dealloc) / span)


def test_a_young_history_says_how_long_it_is_and_what_is_not_set(servers):
    server = servers[0]
    (span,) = _raw(
        "SELECT sum(interval_s) FROM collectors_snapshot WHERE server_id = %(s)s AND kind = 'delta' "
        "AND taken_at >= %(a)s AND taken_at < %(b)s",
        server.pk,
        NOW - timedelta(days=7),
    )
    assert span == (NOW - timedelta(minutes=5) - START).total_seconds()  # from the baseline to the last, at 10:55
    assert server_evidence(server=server, now=NOW).notes == [
        f"The history holds {span / 3600:.1f} h: day and week figures cover that much.",
        "The CPU count is not set on the server: the distance to the spinlock cliff is unknown.",
    ]


def test_without_two_snapshots_in_the_last_hour_rates_are_not_judged(servers):
    gathered = server_evidence(server=servers[0], now=NOW + timedelta(hours=2))
    assert "Only 0 snapshot(s) in the last hour: rates are judged from 2 on." in gathered.notes
    assert gathered.evidence.dealloc_per_s is None and gathered.evidence.keys_disappeared_1d is None


def test_before_postgresql_14_deallocations_are_unknown_and_said_to_be(servers):
    ev = server_evidence(server=servers[1], now=NOW)
    assert ev.evidence.version == 13 and ev.evidence.dealloc_per_s is None and ev.evidence.dealloc_series == ()
    assert ev.evidence.spindelay_series == () and ev.evidence.spindelay_share is None
    assert "PostgreSQL 13 has no deallocation counter: evictions are inferred from disappearing keys." in ev.notes


def test_a_role_that_cannot_read_all_statistics_makes_the_evidence_partial(servers):
    ServerState.objects.filter(server_id=servers[0].pk).update(reads_all_stats=False)
    gathered = server_evidence(server=servers[0], now=NOW)
    assert gathered.partial and gathered.evidence.sees_all_statements is False
    assert any(n.startswith(f"The monitoring role {servers[0].user} lacks pg_read_all_stats") for n in gathered.notes)


def test_a_server_never_collected_has_nothing_to_judge():
    gathered = server_evidence(server=synthetic.register("gather-never"), now=NOW)
    assert (gathered.evidence, gathered.notes, gathered.partial) == (None, [NO_SNAPSHOT], False)
