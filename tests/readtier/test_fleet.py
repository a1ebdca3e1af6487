"""The fleet's summary against the synthetic history: a server's figures are those of its top statements."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from readtier import (
    Window,
    fleet_summary,
    windows,
)
from tests.history_world import raw_rows
from tests.readtier.synthetic import END, everything

pytestmark = pytest.mark.django_db


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
