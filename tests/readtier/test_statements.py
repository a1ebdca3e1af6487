"""Selectors against sums computed by hand from the raw snapshots of a synthetic history written
through the real collection path and rolled up by the real periodic rollup (tests/history_world.py),
over two and a half days that cross a month boundary, with an outage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from readtier import (
    Page,
    StatementFilters,
    Window,
    compare_windows,
    db,
    fleet_summary,
    server_series,
    statement_series,
    top_statements,
    wait_events,
)
from readtier.coverage import window_summary
from tests.history_world import figures, raw_rows, raw_sums
from tests.readtier.synthetic import END, START, everything, hot_statement

pytestmark = pytest.mark.django_db


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, int((END - START).total_seconds() // 60)), st.integers(1, 3 * 24 * 60))
def test_any_window_gives_the_raw_sums(history, start_min, length_min):
    start = START + timedelta(minutes=start_min)
    window = Window(start, start + timedelta(minutes=length_min))
    with transaction.atomic():  # a failing example must not abort the others' transaction
        result = everything(history.pk, window)
    expected, intervals = raw_sums(history.pk, window.start, window.end)
    got = {r.statement_id: figures(r) for r in result.rows}
    assert set(got) == set(expected)
    for sid, values in expected.items():
        assert got[sid].tolist() == values.tolist(), sid
    assert result.total_count == len(expected)
    assert result.intervals == intervals
    assert (result.read_start, result.read_end) == (window.start, window.end)


def test_every_order_sorts_like_the_raw_sums_and_pages_cover_everything(history):
    window = Window(datetime(2026, 10, 31, 3, 17, tzinfo=UTC), datetime(2026, 11, 1, 11, 42, tzinfo=UTC))
    expected, _ = raw_sums(history.pk, window.start, window.end)
    keys = {
        "total": lambda v: v[2] + v[3],
        "exec": lambda v: v[2],
        "plan": lambda v: v[3],
        "calls": lambda v: v[0],
        "mean": lambda v: v[2] / v[0] if v[0] else -1,
        "rows": lambda v: v[4],
        "shared_read": lambda v: v[6],
        "temp": lambda v: v[7],
        "io": lambda v: v[8],
        "wal": lambda v: v[9],
    }
    for order, key in keys.items():
        want = sorted(expected, key=lambda sid: (-key(expected[sid]), sid))
        pages = []
        for number in range(1, 5):
            result = top_statements(server_id=history.pk, window=window, order=order, page=Page(number, 17))
            assert result.total_count == len(expected)
            pages += [r.statement_id for r in result.rows]
        assert pages == want, order
    past = top_statements(server_id=history.pk, window=window, page=Page(99, 17))
    assert past.rows == [] and past.total_count == len(expected)


def test_filters_run_in_sql(history):
    window = Window(datetime(2026, 10, 31, 0, 0, tzinfo=UTC), datetime(2026, 11, 1, 0, 0, tzinfo=UTC))
    every = everything(history.pk, window).rows
    db0 = everything(history.pk, window, filters=StatementFilters(database="db0")).rows
    assert db0 and {r.database for r in db0} == {"db0"}
    assert [r.statement_id for r in db0] == [r.statement_id for r in every if r.database == "db0"]
    user = everything(history.pk, window, filters=StatementFilters(user="app_user1")).rows
    assert user and all(r.user == "app_user1" for r in user)
    one = every[3]
    marker = one.query.split("*/")[0] + "*/"  # "/* q17 */": unique per statement
    found = everything(history.pk, window, filters=StatementFilters(text=marker.upper())).rows
    assert [r.statement_id for r in found] == [one.statement_id]
    # Taken literally: LIKE wildcards and quotes in the text match nothing here, and break nothing.
    for hostile in ("%%%", "_x_y_z_", "'; DROP TABLE collectors_statement; --", "\\"):
        assert everything(history.pk, window, filters=StatementFilters(text=hostile)).rows == []


def test_the_server_time_a_share_is_of_is_what_the_window_summary_says(history):
    window = Window(datetime(2026, 10, 31, 9, 7, tzinfo=UTC), datetime(2026, 10, 31, 12, 41, tzinfo=UTC))
    top = everything(history.pk, window)
    assert top.db_time_ms > 0
    assert top.db_time_ms == pytest.approx(window_summary(server_id=history.pk, window=window).db_time_ms)
    assert top.db_time_ms == pytest.approx(sum(r.total_ms for r in top.rows))  # a page of every statement


def test_planning_not_tracked_is_not_zero(history):
    # The synthetic server runs with track_planning = off.
    result = everything(history.pk, Window(START, END))
    assert result.planning.state == "not tracked"
    assert all(r.plan_ms is None and r.plans is None and r.plan_share is None for r in result.rows)


def test_compare_windows_finds_new_gone_and_regressed(history):
    now = Window(datetime(2026, 11, 1, 0, 0, tzinfo=UTC), datetime(2026, 11, 1, 12, 0, tzinfo=UTC))
    cmp = compare_windows(server_id=history.pk, window=now)
    assert cmp.previous_window == Window(datetime(2026, 10, 31, 12, 0, tzinfo=UTC), now.start)
    current, _ = raw_sums(history.pk, now.start, now.end)
    before, _ = raw_sums(history.pk, now.start - timedelta(hours=12), now.start)
    assert {c.statement_id for c in cmp.new} == set(current) - set(before)
    assert {c.statement_id for c in cmp.gone} == set(before) - set(current)
    total = sum(v[2] + v[3] for v in current.values())
    want = {
        sid
        for sid in set(current) & set(before)
        if current[sid][0]
        and before[sid][0]
        and (current[sid][2] + current[sid][3]) / current[sid][0]
        > 1.5 * (before[sid][2] + before[sid][3]) / before[sid][0]
        and current[sid][2] + current[sid][3] >= 0.01 * total
    }
    assert {c.statement_id for c in cmp.regressions} == want


def test_query_counts_do_not_grow_with_the_window(history):
    counts = []
    for length in (timedelta(minutes=30), timedelta(hours=7), timedelta(days=2)):
        with db.counting() as c:
            everything(history.pk, Window(END - length - timedelta(minutes=13), END - timedelta(minutes=13)))
        counts.append(c.queries)
    assert max(counts) <= 5, counts


def test_every_selector_runs_a_fixed_number_of_queries(history):
    sid = hot_statement(history.pk, Window(START, END))
    counts: dict[str, set[int]] = {}
    for length in (timedelta(minutes=45), timedelta(hours=9), timedelta(days=2)):
        window = Window(END - length - timedelta(minutes=17), END - timedelta(minutes=17))
        calls = {
            "top_statements": lambda w=window: everything(history.pk, w),
            "statement_series": lambda w=window: statement_series(statement_id=sid, window=w),
            "server_series": lambda w=window: server_series(server_id=history.pk, window=w),
            "fleet_summary": lambda w=window: fleet_summary(server_ids=[history.pk], window=w, now=END),
            "wait_events": lambda w=window: wait_events(server_id=history.pk, window=w),
            "compare_windows": lambda w=window: compare_windows(server_id=history.pk, window=w),
        }
        for name, call in calls.items():
            with db.counting() as c:
                call()
            counts.setdefault(name, set()).add(c.queries)
    assert {name: max(n) for name, n in counts.items()} == {
        "top_statements": 5,
        "statement_series": 5,
        "server_series": 5,
        "fleet_summary": 1,
        "wait_events": 4,
        "compare_windows": 10,
    }


def test_a_window_before_the_history_begins_reads_nothing(history):
    """Not even the hour or day that holds its end (that data is all after the window)."""
    for before in (
        Window(START - timedelta(hours=5), START - timedelta(minutes=1)),  # ends in the first snapshot's hour
        Window(START - timedelta(days=2), START - timedelta(days=1)),  # in the day before it
    ):
        top = everything(history.pk, before)
        assert (top.rows, top.total_count, top.intervals) == ([], 0, 0), before
        assert top.planning.state == "no data"
        assert (top.read_start, top.read_end) == (before.start, before.end)
        assert wait_events(server_id=history.pk, window=before).rows == []
    # A window that ends just after the first delta reads it (and only it).
    first = raw_rows(history.pk, START, END)[0][0]
    top = everything(history.pk, Window(START - timedelta(hours=5), first + timedelta(seconds=1)))
    assert top.intervals == 1 and top.total_count > 0
