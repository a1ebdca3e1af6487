"""Windows against the synthetic history: each resolution read once, raw that has expired moving the edges to whole
hours, an edge near the next hour read as its whole hour less the minutes outside."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from readtier import (
    Window,
    windows,
)
from tests.history_world import figures, raw_sums
from tests.readtier.synthetic import everything

pytestmark = pytest.mark.django_db


def test_windows_use_each_resolution_once(history):
    day = Window(datetime(2026, 10, 31, 0, 0, tzinfo=UTC), datetime(2026, 11, 2, 0, 0, tzinfo=UTC))
    assert everything(history.pk, day).resolutions == ("daily",)
    hours = Window(datetime(2026, 10, 31, 2, 0, tzinfo=UTC), datetime(2026, 10, 31, 9, 0, tzinfo=UTC))
    assert everything(history.pk, hours).resolutions == ("hourly",)
    edges = Window(datetime(2026, 10, 30, 23, 31, tzinfo=UTC), datetime(2026, 11, 1, 3, 5, tzinfo=UTC))
    assert everything(history.pk, edges).resolutions == ("raw", "hourly", "daily")


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
