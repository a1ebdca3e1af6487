"""hourly_sums against the selectors' synthetic history (a snapshot every 10 minutes over 2.5 days across a month
end, an outage of 3.5 hours): per window, the same calls and time as statements_in reads one window at a time, in
one query for every window; whole hours only; an hour without history is one where nothing ran."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from readtier.baselines import CallsTime, hourly_sums
from readtier.db import counting
from readtier.server import statements_in
from readtier.windows import Window, WindowError
from tests.readtier.synthetic import END, OUTAGE, START, everything

pytestmark = pytest.mark.django_db

H = timedelta(hours=1)


def _at(month: int, day: int, hour: int) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


def _windows() -> list[Window]:
    return [
        Window(_at(10, 31, 9), _at(10, 31, 10)),  # one hour
        Window(_at(10, 31, 23), _at(11, 1, 1)),  # across the month's end
        Window(OUTAGE[0], OUTAGE[0] + 3 * H),  # inside the outage
        Window(OUTAGE[0] - H, OUTAGE[1] + timedelta(minutes=90)),  # over it
        Window(_at(11, 1, 20), _at(11, 2, 4)),  # across midnight, 8 hours
        Window(_at(10, 27, 0), _at(10, 27, 2)),  # before the history
    ]


def test_every_window_adds_up_as_statements_in_reads_it_in_one_query(history):
    windows = _windows()
    ids = [r.statement_id for r in everything(history.pk, Window(START, END)).rows]
    assert len(ids) == 60
    with counting() as c:
        found = hourly_sums(server_id=history.pk, windows=windows, statement_ids=ids)
    assert c.queries == 1
    assert len(found) == len(windows)
    for window, sums in zip(windows, found, strict=True):
        expected = {
            sid: CallsTime(calls=t.calls, time_ms=t.total_ms)
            for sid, t in statements_in(server_id=history.pk, window=window, statement_ids=ids).items()
            if t.calls or t.total_ms
        }
        assert sums.keys() == expected.keys(), window
        for sid, got in sums.items():
            assert got.calls == expected[sid].calls
            assert got.time_ms == pytest.approx(expected[sid].time_ms, abs=1e-3)
    assert found[0] and found[1] and found[4]  # the windows with history have statements that ran
    assert found[2] == {} and found[5] == {}  # the outage and the days before the history: nothing ran


def test_only_the_statements_asked_for_and_their_mean(history):
    window = Window(_at(10, 31, 9), _at(10, 31, 11))
    ids = [r.statement_id for r in everything(history.pk, Window(START, END)).rows]
    everything_there = hourly_sums(server_id=history.pk, windows=[window], statement_ids=ids)[0]
    assert len(everything_there) >= 2
    some = sorted(everything_there)[:2]
    (two,) = hourly_sums(server_id=history.pk, windows=[window], statement_ids=some)
    assert two == {sid: everything_there[sid] for sid in some}
    one = two[some[0]]
    assert one.mean_ms == pytest.approx(one.time_ms / one.calls)
    assert CallsTime(calls=0, time_ms=0.0).mean_ms is None


def test_whole_hours_only_and_bounded_arguments(history):
    with pytest.raises(WindowError, match="not whole hours"):
        hourly_sums(server_id=history.pk, windows=[Window(START, START + H)], statement_ids=[1])
    with pytest.raises(ValueError, match="at most"):
        hourly_sums(server_id=history.pk, windows=[], statement_ids=range(2000))
    with counting() as c:
        assert hourly_sums(server_id=history.pk, windows=[], statement_ids=[1]) == []
        assert hourly_sums(server_id=history.pk, windows=_windows()[:1], statement_ids=[]) == [{}]
    assert c.queries == 0
