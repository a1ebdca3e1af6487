"""Series of a statement and of a server: which resolution a series is drawn at (pure, on Coverage objects), and
every point against sums computed by hand from the raw snapshots of the synthetic history (synthetic.py), gaps as
gaps, the hour in progress, a day in 10-minute bins and a month in points of two hours."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from console.services import server_delete
from readtier import (
    Window,
    fleet_summary,
    server_series,
    statement_series,
    wait_events,
    windows,
)
from readtier.series import choose_resolution
from readtier.windows import Coverage, WindowError
from tests.history_world import build, figures, raw_rows, raw_sums
from tests.readtier.synthetic import END, OUTAGE, everything, hot_statement

NOW = datetime(2026, 11, 23, 21, 40, tzinfo=UTC)


def cov(raw_from: datetime, hourly_from: datetime | None, daily_from: datetime | None = None) -> Coverage:
    boundary = NOW.replace(minute=0) + timedelta(hours=1)
    return Coverage(
        raw_from=raw_from,
        hourly_from=hourly_from,
        hours_boundary=boundary,
        hours_built_until=NOW,
        days_built_until=None,
        daily_from=daily_from,
    )


def test_a_long_history_by_the_windows_length():
    c = cov(NOW - timedelta(days=3), NOW - timedelta(days=60), NOW - timedelta(days=400))
    assert choose_resolution(Window.last(timedelta(hours=1), now=NOW), c, None) == "raw"
    assert choose_resolution(Window.last(timedelta(hours=6), now=NOW), c, None) == "raw"
    assert choose_resolution(Window.last(timedelta(hours=24), now=NOW), c, None) == "hourly"
    assert choose_resolution(Window.last(timedelta(days=30), now=NOW), c, None) == "hourly"
    assert choose_resolution(Window.last(timedelta(days=90), now=NOW), c, None) == "daily"
    # Raw expired at the window's start: hours.
    old = Window(NOW - timedelta(days=5), NOW - timedelta(days=5) + timedelta(hours=1))
    assert choose_resolution(old, c, None) == "hourly"


def test_a_history_younger_than_the_window_is_drawn_from_its_snapshots():
    """A server added 40 minutes ago: its first hour has one hourly bucket, which would be one point."""
    c = cov(NOW - timedelta(minutes=40), NOW.replace(minute=0), NOW.replace(hour=0, minute=0))
    for length in (timedelta(hours=1), timedelta(hours=6)):
        assert choose_resolution(Window.last(length, now=NOW), c, None) == "raw"
    for length in (timedelta(hours=24), timedelta(days=7), timedelta(days=30)):
        assert choose_resolution(Window.last(length, now=NOW), c, None) == "hourly"


def test_a_history_that_begins_with_a_baseline_just_before_an_hour_is_read_by_its_hours():
    """Its first snapshot, a baseline (no figures), at 20:59 and its first delta at 21:00: the hourly tier begins
    at 21:00 and holds every figure, so a week or a month is drawn by the hour, not as a point a day (a storm a
    minute old averaged into its day). A delta in the hour before the tier begins would be missing from it."""
    base = datetime(2026, 11, 22, 20, 59, 16, tzinfo=UTC)
    c = cov(base, datetime(2026, 11, 22, 21, 0, tzinfo=UTC), datetime(2026, 11, 22, tzinfo=UTC))
    for length in (timedelta(days=7), timedelta(days=30)):
        window = Window.last(length, now=NOW)
        assert choose_resolution(window, replace(c, deltas_from=base + timedelta(minutes=1)), None) == "hourly"
        assert choose_resolution(window, replace(c, deltas_from=base + timedelta(seconds=30)), None) == "daily"


@pytest.mark.django_db(transaction=True)
def test_a_storm_shows_at_the_right_edge_of_a_week_of_a_history_begun_at_17_59():
    """The browser's storm fixture, built a few seconds before an hour: the week and the month are read by the
    hour, their last minutes snapshot by snapshot, the storm the last point drawn."""
    end = datetime(2026, 6, 3, 17, 59, 16, tzinfo=UTC)
    server = build(
        "baseline-at-59",
        n=8,
        start=end - timedelta(hours=3),
        end=end,
        step=timedelta(minutes=1),
        last_rollup_at=end,
        storm_from=end - timedelta(minutes=1),
    )
    try:
        assert windows.coverage(server.pk).hourly_from == datetime(2026, 6, 3, 15, 0, tzinfo=UTC)
        for at in (end, end + timedelta(seconds=50), end + timedelta(minutes=3)):
            for length, resolution in ((timedelta(days=7), "hourly"), (timedelta(days=30), "2h")):
                got = server_series(server_id=server.pk, window=Window(at - length, at))
                drawn = [p for p in got.points if p.calls_per_s is not None]
                assert got.resolution == resolution, (at, length)
                assert drawn[-1].end == end - timedelta(minutes=1) and drawn[-1].end - drawn[-1].start == timedelta(
                    minutes=1
                ), (at, length)
                assert drawn[-1].calls_per_s > 10 * drawn[-2].calls_per_s, (at, length)
    finally:
        server_delete(server=server)


@pytest.mark.django_db(transaction=True)
def test_a_server_added_inside_the_hour_is_drawn_snapshot_by_snapshot_over_a_week():
    """Added at 12:31 and read at 12:50 (or at 13:04, its last minutes reaching into that hour): its hour is drawn
    per snapshot over a week or a month too, not as one dot of an hourly point that has nothing before it."""
    start, end = datetime(2026, 6, 3, 12, 31, 10, tzinfo=UTC), datetime(2026, 6, 3, 12, 50, tzinfo=UTC)
    server = build("added-at-12-31", n=8, start=start, end=end, step=timedelta(minutes=1), last_rollup_at=end)
    try:
        deltas = [r[0] for r in raw_rows(server.pk, start, end)]
        assert len(deltas) == 18
        for at in (end, end + timedelta(minutes=14)):
            for length in (timedelta(days=7), timedelta(days=30)):
                got = server_series(server_id=server.pk, window=Window(at - length, at))
                assert [p.end for p in got.points if p.span_s] == deltas, (at, length)
    finally:
        server_delete(server=server)


@pytest.mark.django_db(transaction=True)
def test_the_last_minutes_of_a_day_in_10_minute_bins_are_drawn_snapshot_by_snapshot():
    """A server collected every 15 s whose storm began two minutes ago, read over 24 hours (10-minute bins):
    the bins that hold the last 10 minutes are its snapshots one by one, the storm at the right edge; the
    rest stays in bins. Asked for explicitly, the bins stay bins."""
    start, end = datetime(2026, 6, 3, 12, 0, 5, tzinfo=UTC), datetime(2026, 6, 3, 12, 43, 20, tzinfo=UTC)
    step = timedelta(seconds=15)
    server = build("fifteen-seconds", n=6, start=start, end=end, step=step, storm_from=end - timedelta(minutes=2))
    try:
        rows = raw_rows(server.pk, start, end + step)
        at = rows[-1][0] + timedelta(seconds=5)
        day = Window(at - timedelta(hours=24), at)
        got = server_series(server_id=server.pk, window=day)
        assert got.resolution == "10min"
        cut = datetime(2026, 6, 3, 12, 30, tzinfo=UTC)  # the bin that holds at - 10 min, and every one after it
        tail = [p for p in got.points if p.start >= cut - step]
        assert [p.end for p in tail] == [r[0] for r in rows if r[0] > cut]
        assert all(p.end - p.start == step for p in tail[1:])
        binned = [p for p in got.points if p.end <= cut]
        assert binned and all(p.end - p.start == timedelta(minutes=10) for p in binned)
        storm = end - timedelta(minutes=2)
        calm = [p.calls_per_s for p in tail if p.end <= storm]
        stormy = [p.calls_per_s for p in tail if p.start >= storm]
        assert len(stormy) >= 7 and sum(stormy) / len(stormy) > 10 * sum(calm) / len(calm)
        asked = server_series(server_id=server.pk, window=day, resolution="10min")
        assert all(p.end - p.start == timedelta(minutes=10) for p in asked.points)
        assert sum(1 for p in asked.points if p.end > at - timedelta(minutes=10)) == 2
    finally:
        server_delete(server=server)


def test_a_resolution_asked_for_is_kept():
    c = cov(NOW - timedelta(days=3), NOW - timedelta(days=60))
    assert choose_resolution(Window.last(timedelta(hours=1), now=NOW), c, "daily") == "daily"


# Over the outage, the end of October and two UTC days; and from just after the outage, where the
# boundary before the window's first hour has no rows (the previous ones are earlier in the day).
WINDOWS = {
    "3 days": Window(datetime(2026, 10, 30, 21, 40, tzinfo=UTC), datetime(2026, 11, 2, 3, 10, tzinfo=UTC)),
    "after the outage": Window(datetime(2026, 10, 31, 17, 5, tzinfo=UTC), datetime(2026, 10, 31, 23, 0, tzinfo=UTC)),
}


@pytest.mark.django_db
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


@pytest.mark.django_db
def test_statement_series_raw_is_per_snapshot(history):
    window = Window(datetime(2026, 11, 1, 10, 3, tzinfo=UTC), datetime(2026, 11, 1, 13, 0, tzinfo=UTC))
    sid = hot_statement(history.pk, window)
    series = statement_series(statement_id=sid, window=window)
    assert series.resolution == "raw"
    rows = raw_rows(history.pk, window.start, window.end)
    assert [p.end for p in series.points] == [r[0] for r in rows]
    assert [p.calls for p in series.points] == [int(r[2][sid][0]) if sid in r[2] else 0 for r in rows]


@pytest.mark.django_db
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


@pytest.mark.django_db
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


@pytest.mark.django_db
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


@pytest.mark.django_db
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
