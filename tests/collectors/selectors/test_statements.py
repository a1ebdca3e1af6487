"""Selectors against sums computed by hand from the raw snapshots of a synthetic history written
through the real collection path and rolled up by the real periodic rollup (tests/history_world.py),
over two and a half days that cross a month boundary, with an outage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import tiers
from collectors.selectors import (
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
    windows,
)
from collectors.selectors.windows import WindowError
from console.services import server_delete
from tests.history_world import build, figures, raw_rows, raw_sums

pytestmark = pytest.mark.django_db

START = datetime(2026, 10, 30, 21, 7, tzinfo=UTC)  # 2.5 days over the end of October
STEP = timedelta(minutes=10)
OUTAGE = (datetime(2026, 10, 31, 14, 0, tzinfo=UTC), datetime(2026, 10, 31, 17, 30, tzinfo=UTC))
END = datetime(2026, 11, 2, 5, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def history(django_db_setup, django_db_blocker):
    """A synthetic server with 60 statements, a snapshot every 10 minutes, an outage of 3.5 hours."""
    with django_db_blocker.unblock():
        server = build("selectors-synthetic", n=60, start=START, end=END, step=STEP, outage=OUTAGE)
        yield server
        server_delete(server=server)


def everything(server_id: int, window: Window, **kw):
    return top_statements(server_id=server_id, window=window, page=Page(1, 500), **kw)


def test_the_tiers_were_built(history):
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM collectors_server_hourly WHERE server_id = %s", [history.pk])
        hours = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM collectors_server_daily WHERE server_id = %s", [history.pk])
        days = cur.fetchone()[0]
    assert hours == 56 - 3  # 21:00 on the 30th to 04:00 on the 2nd, less the 3 hours without a snapshot
    assert days == 4  # 30, 31 October, 1 and 2 November (rolled up a day later)


def test_zero_figures_are_stored_as_null_and_read_as_zero(history):
    """The statement tiers keep no zeros (a NULL takes no bytes); read back, NULL is 0 again."""
    with connection.cursor() as cur:
        for table in ("collectors_statement_hourly", "collectors_statement_daily"):
            cur.execute(
                f"SELECT count(*) FILTER (WHERE plan_us = 0 OR calls = 0 OR temp_blks = 0 OR wal_bytes = 0), "
                f"count(*) FILTER (WHERE plan_us IS NULL), count(*) FILTER (WHERE calls IS NOT NULL), count(*) "
                f"FROM {table} WHERE server_id = %s",
                [history.pk],
            )
            zeros, null_plan, with_calls, rows = cur.fetchone()
            assert rows > 0 and zeros == 0, table
            assert 0 < null_plan, table  # track_planning off: no planning time
            assert with_calls > 0, table
        cur.execute(
            "SELECT max(until) FROM collectors_statement_hourly WHERE server_id = %s AND plan_us IS NULL", [history.pk]
        )
        until = cur.fetchone()[0]
    sums = tiers.read_boundary(tiers.tables.STATEMENT_HOURLY, history.pk, until)
    plan_us = sums.values[:, tiers.TOTAL_NAMES.index("plan_us")]
    assert (plan_us == 0).any() and (plan_us >= 0).all()


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


def test_windows_use_each_resolution_once(history):
    day = Window(datetime(2026, 10, 31, 0, 0, tzinfo=UTC), datetime(2026, 11, 2, 0, 0, tzinfo=UTC))
    assert everything(history.pk, day).resolutions == ("daily",)
    hours = Window(datetime(2026, 10, 31, 2, 0, tzinfo=UTC), datetime(2026, 10, 31, 9, 0, tzinfo=UTC))
    assert everything(history.pk, hours).resolutions == ("hourly",)
    edges = Window(datetime(2026, 10, 30, 23, 31, tzinfo=UTC), datetime(2026, 11, 1, 3, 5, tzinfo=UTC))
    assert everything(history.pk, edges).resolutions == ("raw", "hourly", "daily")


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


def test_planning_not_tracked_is_not_zero(history):
    # The synthetic server runs with track_planning = off.
    result = everything(history.pk, Window(START, END))
    assert result.planning.state == "not tracked"
    assert all(r.plan_ms is None and r.plans is None and r.plan_share is None for r in result.rows)


def test_expired_raw_moves_the_edges_to_whole_hours(history):
    window = Window(datetime(2026, 10, 31, 5, 23, tzinfo=UTC), datetime(2026, 10, 31, 9, 41, tzinfo=UTC))
    expected, _ = raw_sums(
        history.pk, datetime(2026, 10, 31, 5, 0, tzinfo=UTC), datetime(2026, 10, 31, 10, 0, tzinfo=UTC)
    )
    with connection.cursor() as cur:  # as retention would: the whole day's raw partition goes
        cur.execute(
            "DELETE FROM collectors_snapshot WHERE server_id = %s AND taken_at < %s",
            [history.pk, datetime(2026, 11, 1, tzinfo=UTC)],
        )
    result = everything(history.pk, window)
    assert (result.read_start, result.read_end) == (
        datetime(2026, 10, 31, 5, 0, tzinfo=UTC),
        datetime(2026, 10, 31, 10, 0, tzinfo=UTC),
    )
    assert {r.statement_id: figures(r).tolist() for r in result.rows} == {k: v.tolist() for k, v in expected.items()}


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


def test_day_totals_equal_the_sum_of_their_hours(history):
    with connection.cursor() as cur:
        cur.execute(
            "SELECT d.calls, (SELECT sum(calls) FROM collectors_server_hourly h WHERE h.server_id = d.server_id "
            "AND h.bucket >= d.bucket AND h.bucket < d.bucket + interval '1 day') FROM collectors_server_daily d "
            "WHERE d.server_id = %s",
            [history.pk],
        )
        rows = cur.fetchall()
    assert rows and all(a == b for a, b in rows)
    month_end = tiers.read_boundary(tiers.tables.STATEMENT_DAILY, history.pk, datetime(2026, 11, 1, tzinfo=UTC))
    expected, _ = raw_sums(history.pk, datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
    got = dict(zip(month_end.statement_id.tolist(), month_end.values.tolist(), strict=True))
    assert {k: v for k, v in got.items() if any(v)} == {k: v.tolist() for k, v in expected.items()}


def hot_statement(server_id: int, window: Window) -> int:
    return everything(server_id, window, order="calls").rows[0].statement_id


# Over the outage, the end of October and two UTC days; and from just after the outage, where the
# boundary before the window's first hour has no rows (the previous ones are earlier in the day).
WINDOWS = {
    "3 days": Window(datetime(2026, 10, 30, 21, 40, tzinfo=UTC), datetime(2026, 11, 2, 3, 10, tzinfo=UTC)),
    "after the outage": Window(datetime(2026, 10, 31, 17, 5, tzinfo=UTC), datetime(2026, 10, 31, 23, 0, tzinfo=UTC)),
}


@pytest.mark.parametrize("resolution", ["hourly", "daily"])
@pytest.mark.parametrize("name", WINDOWS)
def test_statement_series_matches_the_raw_snapshots_with_gaps_as_gaps(history, resolution, name):
    """Every statement that ran in the window (the hot one, and those that first run in the middle of a
    day or a month), point by point against the raw snapshots."""
    window = WINDOWS[name]
    hot = hot_statement(history.pk, window)
    ran = [r.statement_id for r in everything(history.pk, window).rows]
    assert hot in ran and len(ran) > 10
    rows = None
    for sid in ran:
        series = statement_series(statement_id=sid, window=window, resolution=resolution)
        assert series.resolution == resolution and series.server_id == history.pk
        rows = rows or raw_rows(history.pk, series.points[0].start, series.points[-1].end)
        for p in series.points:
            inside = [r for r in rows if p.start <= r[0] < p.end]
            if not inside:
                assert p.span_s is None and p.calls_per_s is None, p.start  # a gap stays a gap
                continue
            span = sum(r[1] for r in inside)
            calls = sum(int(r[2][sid][0]) for r in inside if sid in r[2])
            exec_us = sum(int(r[2][sid][2]) for r in inside if sid in r[2])
            assert p.span_s == pytest.approx(span) and p.calls == calls, (sid, p.start)
            assert p.calls_per_s == pytest.approx(calls / span)
            assert p.mean_exec_ms == (pytest.approx(exec_us / 1000 / calls) if calls else None)
            assert p.mean_plan_ms is None and p.planning_tracked is False  # track_planning off: not 0
        if resolution == "hourly" and sid == hot and name == "3 days":
            gaps = [p.start.hour for p in series.points if p.span_s is None]
            assert gaps == [14, 15, 16]  # the outage
            after = next(p for p in series.points if p.start == datetime(2026, 10, 31, 17, tzinfo=UTC))
            assert after.span_s > 3 * 3600  # the first snapshot after the outage spans it: averaged, no spike


def test_statement_series_raw_is_per_snapshot(history):
    window = Window(datetime(2026, 11, 1, 10, 3, tzinfo=UTC), datetime(2026, 11, 1, 13, 0, tzinfo=UTC))
    sid = hot_statement(history.pk, window)
    series = statement_series(statement_id=sid, window=window)
    assert series.resolution == "raw"
    rows = raw_rows(history.pk, window.start, window.end)
    assert [p.end for p in series.points] == [r[0] for r in rows]
    assert [p.calls for p in series.points] == [int(r[2][sid][0]) if sid in r[2] else 0 for r in rows]


def test_server_series_and_waits_match_the_raw_snapshots(history):
    window = Window(datetime(2026, 10, 31, 10, 0, tzinfo=UTC), datetime(2026, 11, 1, 10, 0, tzinfo=UTC))
    series = server_series(server_id=history.pk, window=window, top_events=3, resolution="hourly")
    assert series.resolution == "hourly" and len(series.points) == 24
    with connection.cursor() as cur:
        cur.execute(
            "SELECT date_trunc('hour', taken_at), sum(interval_s), sum(calls)::int8, sum(exec_us)::int8, "
            "sum(dealloc_delta)::int8 "
            "FROM collectors_snapshot WHERE server_id = %s AND kind = 'delta' AND taken_at >= %s AND taken_at < %s "
            "GROUP BY 1",
            [history.pk, window.start, window.end],
        )
        expected = {r[0]: r[1:] for r in cur.fetchall()}
        cur.execute(
            "SELECT date_trunc('hour', taken_at), event_type, event, sum(session_s) FROM collectors_wait_event "
            "WHERE server_id = %s AND taken_at >= %s AND taken_at < %s GROUP BY 1, 2, 3",
            [history.pk, window.start, window.end],
        )
        waits = cur.fetchall()
    for p in series.points:
        if p.start not in expected:
            assert p.span_s is None
            continue
        span, calls, exec_us, dealloc = expected[p.start]
        assert p.calls_per_s == pytest.approx(calls / span)
        assert p.exec_ms_per_s == pytest.approx(exec_us / 1000 / span)
        assert p.plan_ms_per_s is None and p.planning == "not tracked"
        assert p.dealloc_per_s == pytest.approx(dealloc / span)
        hour_waits = sum(s for b, _, _, s in waits if b == p.start)
        assert sum(p.active_sessions.values()) == pytest.approx(hour_waits / span)
    assert len(series.events) <= 4 and (len(series.events) < 4 or series.events[-1] == "other")
    total = wait_events(server_id=history.pk, window=window, top=3)
    assert sum(r.session_s for r in total.rows) == pytest.approx(sum(s for *_, s in waits))
    assert total.rows[-1].event == "other" and total.rows[0].session_s >= total.rows[1].session_s


def test_fleet_summary_agrees_with_top_statements(history):
    window = Window(datetime(2026, 11, 1, 2, 31, tzinfo=UTC), datetime(2026, 11, 2, 2, 31, tzinfo=UTC))
    [row] = fleet_summary(server_ids=[history.pk], window=window, now=END)
    top = everything(history.pk, window)
    calls = sum(r.calls for r in top.rows)
    assert row.snapshots == top.intervals
    assert row.calls_per_s == pytest.approx(calls / row.span_s)
    assert row.planning == "not tracked" and row.plan_ms_per_s is None
    assert row.status == "ok" and len(row.trend_calls_per_s) == 25 and all(v is not None for v in row.trend_calls_per_s)
    # Each hour of the trend: the snapshots taken in that hour and in the window (the edges are part hours).
    rows = raw_rows(history.pk, window.start, window.end)
    for i, rate in enumerate(row.trend_calls_per_s):
        hour = windows.floor_hour(window.start) + timedelta(hours=i)
        inside = [r for r in rows if hour <= r[0] < hour + timedelta(hours=1)]
        calls = sum(int(f[0]) for r in inside for f in r[2].values())
        assert rate == pytest.approx(calls / sum(r[1] for r in inside)), hour


def test_the_hour_in_progress_is_read_from_its_bucket_and_the_snapshots_since(django_db_blocker):
    """Rolled up at 12:44 while snapshots go on to 12:58: windows ending at any time, before or after
    what the bucket holds, still give the raw sums; reading up to now needs only the snapshots since."""
    start, end = datetime(2026, 6, 3, 9, 1, tzinfo=UTC), datetime(2026, 6, 3, 13, 0, tzinfo=UTC)
    rolled = datetime(2026, 6, 3, 12, 44, 30, tzinfo=UTC)
    server = build("in-progress", n=40, start=start, end=end, step=timedelta(minutes=3), last_rollup_at=rolled)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT bucket, built_until FROM collectors_server_hourly WHERE server_id = %s "
            "ORDER BY bucket DESC LIMIT 1",
            [server.pk],
        )
        bucket, built_until = cur.fetchone()
    assert bucket == datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
    assert datetime(2026, 6, 3, 12, 40, tzinfo=UTC) < built_until <= rolled
    for minutes in range(0, 240, 7):
        for length in (timedelta(minutes=20), timedelta(minutes=95), timedelta(hours=3, minutes=31)):
            w_end = start + timedelta(minutes=minutes) + length
            window = Window(w_end - length, w_end)
            expected, intervals = raw_sums(server.pk, window.start, window.end)
            result = everything(server.pk, window)
            assert {r.statement_id: figures(r).tolist() for r in result.rows} == {
                k: v.tolist() for k, v in expected.items()
            }, window
            assert result.intervals == intervals, window
            [fleet] = fleet_summary(server_ids=[server.pk], window=window, now=end)
            assert fleet.snapshots == intervals, window
            calls = sum(int(v[0]) for v in expected.values())
            assert fleet.calls_per_s == (pytest.approx(calls / fleet.span_s) if intervals else None), window
    now = Window(datetime(2026, 6, 3, 11, 0, tzinfo=UTC), end)
    p = windows.plan(now, windows.coverage(server.pk))
    assert p.raw == [(built_until, end, 1)]  # only the snapshots since the last rollup
    # A statement's hourly series reads the hour in progress the same way: each hour's calls are the raw
    # snapshots', the last one included (rolled up only to 12:44), over the intervals they span.
    day = Window(end - timedelta(hours=24), end)
    top = everything(server.pk, Window(datetime(2026, 6, 3, 12, 0, tzinfo=UTC), end)).rows[0]
    series = statement_series(statement_id=top.statement_id, window=day, resolution="hourly")
    rows = raw_rows(server.pk, day.start, day.end)
    for p in series.points:
        inside = [r for r in rows if p.start <= r[0] < p.end]
        if not inside:
            assert p.span_s is None, p.start
            continue
        calls = sum(int(r[2][top.statement_id][0]) for r in inside if top.statement_id in r[2])
        assert p.span_s == pytest.approx(sum(r[1] for r in inside)) and p.calls == calls, p.start
    assert series.points[-1].start == datetime(2026, 6, 3, 12, 0, tzinfo=UTC) and series.points[-1].calls > 0
    # A range ending inside an hour (a statement's 24-hour view, a server's 3-day one, at 12:50): that hour is
    # drawn snapshot by snapshot, so what began minutes ago is not averaged into its hour; the hours before stay
    # hourly.
    at = datetime(2026, 6, 3, 12, 50, tzinfo=UTC)
    hour = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
    tail_rows = raw_rows(server.pk, hour, at)
    for got, hours in (
        (server_series(server_id=server.pk, window=Window(at - timedelta(days=3), at)), 72),
        (statement_series(statement_id=top.statement_id, window=Window(at - timedelta(hours=24), at)), 24),
    ):
        assert got.resolution == "hourly"
        assert [p.end - p.start for p in got.points if p.end <= hour] == [timedelta(hours=1)] * hours
        assert [p.end for p in got.points if p.end > hour] == [r[0] for r in tail_rows]
    # Five minutes into an hour, the last 10 minutes reach into the hour before: both are drawn per snapshot.
    early = datetime(2026, 6, 3, 12, 5, tzinfo=UTC)
    got = server_series(server_id=server.pk, window=Window(early - timedelta(days=3), early))
    assert [p.end for p in got.points if p.end > hour - timedelta(hours=1)] == [
        r[0] for r in raw_rows(server.pk, hour - timedelta(hours=1), early)
    ]
    three_days = server_series(server_id=server.pk, window=Window(at - timedelta(days=3), at))
    server_tail = three_days.points[-len(tail_rows) :]
    calls = [sum(int(f[0]) for f in r[2].values()) / r[1] for r in tail_rows]
    assert [p.calls_per_s for p in server_tail] == pytest.approx(calls)


def test_a_day_of_a_server_is_read_in_10_minute_bins_of_its_snapshots_with_the_outage_as_a_gap(
    history, django_db_blocker
):
    """A server collected every 2 minutes, a day with a 1.5-hour outage: its day is drawn in 10-minute bins."""
    start, outage = datetime(2026, 9, 1, 0, 1, tzinfo=UTC), (datetime(2026, 9, 1, 14, 0, tzinfo=UTC), None)
    outage = (outage[0], outage[0] + timedelta(hours=1, minutes=30))
    with django_db_blocker.unblock():
        end = start + timedelta(hours=25)
        server = build("ten-minute-bins", n=12, start=start, end=end, outage=outage, step=timedelta(minutes=2))
    try:
        window = Window(start + timedelta(hours=1), start + timedelta(hours=24, minutes=59))
        series = server_series(server_id=server.pk, window=window)
        assert series.resolution == "10min" and 100 <= len(series.points) <= 400
        assert all(p.end - p.start == timedelta(minutes=10) for p in series.points)
        rows = raw_rows(server.pk, series.points[0].start, series.points[-1].end)
        gaps = []
        for p in series.points:
            inside = [r for r in rows if p.start <= r[0] < p.end]
            if not inside:
                assert p.span_s is None and p.calls_per_s is None, p.start
                gaps.append(p.start)
                continue
            calls = sum(int(f[0]) for r in inside for f in r[2].values())
            assert p.span_s == pytest.approx(sum(r[1] for r in inside)), p.start
            assert p.calls_per_s == pytest.approx(calls / p.span_s), p.start
        # The outage's 9 bins have no snapshot (the one after it, at 15:31, spans it from 13:59).
        assert gaps == [outage[0] + i * timedelta(minutes=10) for i in range(9)]
        # Asked for, the hours are still there; a statement has no 10-minute series.
        assert server_series(server_id=server.pk, window=window, resolution="hourly").resolution == "hourly"
        sid = hot_statement(server.pk, window)
        with pytest.raises(WindowError, match="unknown resolution '10min'"):
            statement_series(statement_id=sid, window=window, resolution="10min")
    finally:
        with django_db_blocker.unblock():
            server_delete(server=server)
    # A server collected every 10 minutes would have bins without a snapshot between those with one:
    # its day is drawn by the hour (the 10-minute bins only when asked for).
    day = Window(OUTAGE[0] - timedelta(hours=12, minutes=3), OUTAGE[0] + timedelta(hours=11, minutes=57))
    assert server_series(server_id=history.pk, window=day).resolution == "hourly"
    assert server_series(server_id=history.pk, window=day, resolution="10min").resolution == "10min"


def test_a_month_is_drawn_in_points_of_two_hours_summed_from_the_hours(history):
    """30 days read hourly would be 720 points: automatic, they are 2 hours each (aligned on the UTC day), each
    the sum of its two hours; the hour in progress at the window's end is drawn snapshot by snapshot (not the
    hour before it); asked for, the hours are still there."""
    month = Window(END - timedelta(days=30, minutes=20), END - timedelta(minutes=20))  # ends at 04:40
    sid = hot_statement(history.pk, WINDOWS["3 days"])
    for read in (
        lambda r=None: server_series(server_id=history.pk, window=month, resolution=r),
        lambda r=None: statement_series(statement_id=sid, window=month, resolution=r),
    ):
        grouped, hours = read(), read("hourly")
        assert (grouped.resolution, hours.resolution) == ("2h", "hourly")
        two_hours = [p for p in grouped.points if p.end - p.start == timedelta(hours=2)]
        assert 355 <= len(two_hours) <= 360 and len(hours.points) == 721
        # Pairs from the window's first hour up to 02:00-04:00 on 2 November; then the hour in progress at the
        # window's end (04:00-04:40), snapshot by snapshot.
        assert grouped.points[0].start == hours.points[0].start and all(p.start.hour % 2 == 0 for p in two_hours)
        in_progress = datetime(2026, 11, 2, 4, 0, tzinfo=UTC)
        tail = [p for p in grouped.points if p.start >= in_progress - timedelta(minutes=10)]
        assert [p.end for p in tail] == [r[0] for r in raw_rows(history.pk, in_progress, month.end)]
        assert grouped.points[len(grouped.points) - len(tail) - 1].end == in_progress
        by_start = {p.start: p for p in hours.points}
        drawn = 0
        for p in grouped.points[: len(grouped.points) - len(tail)]:
            pair = [
                q for q in (by_start.get(p.start), by_start.get(p.start + timedelta(hours=1))) if q and q.end <= p.end
            ]
            spans = [q.span_s for q in pair if q.span_s]
            if not spans:
                assert p.span_s is None, p.start  # hours without a snapshot: still a gap
                continue
            drawn += 1
            calls = sum(q.calls_per_s * q.span_s for q in pair if q.span_s)
            assert p.span_s == pytest.approx(sum(spans)) and p.calls_per_s == pytest.approx(calls / sum(spans))
        assert drawn >= 25  # the 2.5 days of history


def test_an_edge_near_the_next_hour_is_its_whole_hour_less_the_minutes_outside(history):
    window = Window(datetime(2026, 10, 31, 5, 7, tzinfo=UTC), datetime(2026, 10, 31, 9, 52, tzinfo=UTC))
    p = windows.plan(window, windows.coverage(history.pk))
    assert p.raw == [
        (datetime(2026, 10, 31, 5, 0, tzinfo=UTC), window.start, -1),
        (window.end, datetime(2026, 10, 31, 10, 0, tzinfo=UTC), -1),
    ]
    assert p.core == (datetime(2026, 10, 31, 5, 0, tzinfo=UTC), datetime(2026, 10, 31, 10, 0, tzinfo=UTC))
    expected, intervals = raw_sums(history.pk, window.start, window.end)
    result = everything(history.pk, window)
    assert {r.statement_id: figures(r).tolist() for r in result.rows} == {k: v.tolist() for k, v in expected.items()}
    assert result.intervals == intervals


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
