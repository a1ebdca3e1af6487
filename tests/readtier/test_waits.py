"""wait_events: a server's (or one statement's) wait events over a window as session-seconds, average active
sessions over the seconds its snapshots cover and shares of the whole, heaviest first with the rest folded into
"other". Shown against the wait samples of the raw snapshots of a small history, summed here in SQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from console.services import server_delete
from readtier import Window
from readtier.waits import wait_events
from tests.history_world import build

pytestmark = pytest.mark.django_db

START, END = datetime(2026, 6, 12, 6, 4, tzinfo=UTC), datetime(2026, 6, 12, 11, 0, tzinfo=UTC)
WINDOW = Window(datetime(2026, 6, 12, 6, 47, tzinfo=UTC), datetime(2026, 6, 12, 10, 21, tzinfo=UTC))


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        s = build("waits-small", n=8, start=START, end=END, step=timedelta(minutes=10))
        yield s
        server_delete(server=s)


def _raw(server_id: int, window: Window, query_id: int | None = None) -> tuple[dict, float]:
    """{label: session-seconds} of the wait samples taken in the window, and the seconds its delta snapshots cover."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT coalesce(event_type || ':' || event, 'CPU (no wait event)'), sum(session_s) "
            "FROM collectors_wait_event WHERE server_id = %s AND taken_at >= %s AND taken_at < %s "
            "AND (%s::int8 IS NULL OR query_id = %s) GROUP BY 1",
            [server_id, window.start, window.end, query_id, query_id],
        )
        sums = dict(cur.fetchall())
        cur.execute(
            "SELECT sum(interval_s) FROM collectors_snapshot WHERE server_id = %s AND kind = 'delta' "
            "AND taken_at >= %s AND taken_at < %s",
            [server_id, window.start, window.end],
        )
        return sums, cur.fetchone()[0]


def test_every_event_is_its_raw_session_seconds_with_its_sessions_and_share(server):
    expected, span = _raw(server.pk, WINDOW)
    got = wait_events(server_id=server.pk, window=WINDOW)
    assert len(expected) == 7 and "CPU (no wait event)" in expected  # the synthetic server's seven events
    assert {r.event: r.session_s for r in got.rows} == pytest.approx(expected)
    assert got.span_s == span and (got.read_start, got.read_end) == (WINDOW.start, WINDOW.end)
    grand = sum(expected.values())
    for r in got.rows:
        assert r.active_sessions == pytest.approx(expected[r.event] / span) and r.share == pytest.approx(
            expected[r.event] / grand
        )
        assert r.event_type == (None if r.event.startswith("CPU") else r.event.split(":")[0])
    assert [r.session_s for r in got.rows] == sorted((r.session_s for r in got.rows), reverse=True)
    assert got.statement_id is None and got.query_id is None


def test_beyond_top_the_lighter_events_are_folded_into_other(server):
    expected, span = _raw(server.pk, WINDOW)
    heaviest = sorted(expected.values(), reverse=True)
    got = wait_events(server_id=server.pk, window=WINDOW, top=3)
    assert [r.session_s for r in got.rows] == pytest.approx(heaviest[:3] + [sum(heaviest[3:])])
    other = got.rows[-1]
    assert (other.event, other.event_type) == ("other", None)
    assert other.share == pytest.approx(sum(heaviest[3:]) / sum(heaviest))
    assert other.active_sessions == pytest.approx(sum(heaviest[3:]) / span)


def test_one_statements_events_are_those_sampled_with_its_query_id(server):
    with connection.cursor() as cur:
        cur.execute(
            "SELECT s.id, s.queryid FROM collectors_statement s JOIN collectors_wait_event w ON w.query_id = s.queryid "
            "AND w.server_id = s.server_id WHERE s.server_id = %s GROUP BY 1, 2 ORDER BY sum(w.session_s) DESC LIMIT 1",
            [server.pk],
        )
        statement_id, query_id = cur.fetchone()
    expected, span = _raw(server.pk, WINDOW, query_id)
    got = wait_events(server_id=server.pk, window=WINDOW, statement_id=statement_id)
    assert (got.statement_id, got.query_id, got.span_s) == (statement_id, query_id, span)
    assert {r.event: r.session_s for r in got.rows} == pytest.approx(expected)
    assert sum(r.share for r in got.rows) == pytest.approx(1.0)  # a share of the statement's own time


def test_a_statement_the_server_does_not_have_is_refused_by_name(server):
    with pytest.raises(LookupError, match=f"no statement 0 on server {server.pk}"):
        wait_events(server_id=server.pk, window=WINDOW, statement_id=0)


def test_a_window_before_the_history_holds_no_events_and_no_seconds(server):
    got = wait_events(server_id=server.pk, window=Window(START - timedelta(days=2), START - timedelta(days=1)))
    assert (got.rows, got.span_s) == ([], 0.0)
