"""snapshots: a server's snapshots newest first, a page at a time with the total, optionally only those taken in a
window; latest_snapshot: the newest one. Shown here against the snapshot times a small history was collected at
(every 10 minutes but during an outage), and for a server never collected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bench import synthetic
from console.services import server_delete
from readtier import Page, Window
from readtier.snapshots import latest_snapshot, snapshots
from tests.history_world import build

pytestmark = pytest.mark.django_db

START = datetime(2026, 6, 10, 8, 5, tzinfo=UTC)
END = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)
STEP = timedelta(minutes=10)
OUTAGE = (datetime(2026, 6, 10, 9, 30, tzinfo=UTC), datetime(2026, 6, 10, 10, 0, tzinfo=UTC))
# Collected at START and every STEP before END, except during the outage.
TIMES = [START + k * STEP for k in range(24) if START + k * STEP < END]
TAKEN = [t for t in TIMES if not OUTAGE[0] <= t < OUTAGE[1]]


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        s = build("snapshots-small", n=5, start=START, end=END, step=STEP, outage=OUTAGE)
        yield s
        server_delete(server=s)


def test_every_snapshot_is_listed_newest_first_with_the_total(server):
    page = snapshots(server_id=server.pk, page=Page(1, 100))
    assert [r.taken_at for r in page.rows] == sorted(TAKEN, reverse=True)
    assert page.total_count == len(TAKEN) == 21


def test_pages_cut_the_same_list_and_a_page_past_the_end_is_empty_but_counted(server):
    pages = [snapshots(server_id=server.pk, page=Page(n, 8)) for n in (1, 2, 3)]
    assert [len(p.rows) for p in pages] == [8, 8, 5]
    assert [r.taken_at for p in pages for r in p.rows] == sorted(TAKEN, reverse=True)
    assert {p.total_count for p in pages} == {len(TAKEN)}
    past = snapshots(server_id=server.pk, page=Page(4, 8))
    assert past.rows == [] and past.total_count == len(TAKEN)


def test_a_window_keeps_the_snapshots_taken_in_it_start_included_end_excluded(server):
    window = Window(datetime(2026, 6, 10, 9, 5, tzinfo=UTC), datetime(2026, 6, 10, 10, 25, tzinfo=UTC))
    page = snapshots(server_id=server.pk, window=window)
    expected = [t for t in sorted(TAKEN, reverse=True) if window.start <= t < window.end]
    assert [r.taken_at for r in page.rows] == expected and page.total_count == len(expected)
    assert expected[-1] == window.start and window.end in TAKEN  # both edges are snapshot times


def test_each_snapshot_says_what_it_read_and_the_interval_it_closes(server):
    rows = {r.taken_at: r for r in snapshots(server_id=server.pk, page=Page(1, 100)).rows}
    first = rows[START]
    assert (first.kind, first.prev_taken_at, first.interval_s, first.dealloc_per_s) == ("baseline", None, None, None)
    after = min(t for t in TAKEN if t >= OUTAGE[1])  # 10:05, after 09:25: the outage is in its interval
    before = max(t for t in TAKEN if t < OUTAGE[0])
    assert (rows[after].kind, rows[after].prev_taken_at) == ("delta", before)
    assert rows[after].interval_s == (after - before).total_seconds() == 2400
    assert rows[after].dealloc_per_s == 0.0  # the synthetic server deallocates nothing: known, and 0
    for row in rows.values():
        assert (row.server_version_num, row.entries, row.entries_max, row.track_planning) == (170010, 5, 10000, False)


def test_latest_snapshot_is_the_newest_one(server):
    latest = latest_snapshot(server_id=server.pk)
    assert latest.taken_at == max(TAKEN) and latest.kind == "delta"
    assert latest.prev_taken_at == max(TAKEN) - STEP and latest.interval_s == STEP.total_seconds()


def test_a_window_without_snapshots_is_empty(server):
    before = Window(START - timedelta(days=1), START)
    assert snapshots(server_id=server.pk, window=before) == snapshots(server_id=server.pk, window=before, page=Page(2))
    assert snapshots(server_id=server.pk, window=before).rows == []
    assert snapshots(server_id=server.pk, window=before).total_count == 0


def test_a_server_never_collected_has_no_snapshot():
    never = synthetic.register("snapshots-never")
    assert snapshots(server_id=never.pk).rows == [] and snapshots(server_id=never.pk).total_count == 0
    assert snapshots(server_id=never.pk, page=Page(3, 5)).total_count == 0
    assert latest_snapshot(server_id=never.pk) is None
