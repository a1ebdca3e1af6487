"""What the eye sees on the server, statement and planning pages at every range, in chromium: a server
collected every minute for 25 hours, with a 90-minute outage that ended 3.5 hours ago and a storm (every
statement running 40 times as often) that began a minute ago. Each chart has enough points to read a shape,
its gaps are null points (a break), the snapshot after the outage is one step across it, and the storm is a
spike at the right edge of every range, the 24 h and 30 d views included."""

from __future__ import annotations

import statistics
from datetime import timedelta

import pytest
from django.utils import timezone

from inventory.models import Server
from readtier import Page, Window, top_statements
from tests.browser.conftest import assert_charts_drawn

MINUTE_MS = 60_000

SPECS = """() => [...document.querySelectorAll('canvas[data-chart]')].map(c => ({
    id: c.dataset.chart, drawn: Number(c.dataset.drawn),
    spec: JSON.parse(document.getElementById(c.dataset.chart).textContent)}))"""


@pytest.fixture
def stormy(synthetic_server) -> tuple[Server, dict]:
    now = timezone.now()
    outage = (now - timedelta(hours=5), now - timedelta(hours=3, minutes=30))
    server = synthetic_server(
        "db-storm", hours=25, step_min=1, n=8, outage=outage, storm_from=now - timedelta(minutes=1)
    )
    return server, {"now": now, "outage": outage}


def charts(page, url: str) -> dict[str, dict]:
    page.goto(url)
    assert_charts_drawn(page, at_least=1)
    return {c["id"]: c for c in page.evaluate(SPECS)}


def values(chart: dict, series: int = 0) -> list[float | None]:
    return chart["spec"]["series"][series]["data"]


def assert_storm_at_the_right_edge(chart: dict, now_ms: float, series: int = 0) -> None:
    """The last value drawn is the storm: far above the range's typical value, and within minutes of now."""
    data, x = values(chart, series), chart["spec"]["x"]
    drawn = [(t, v) for t, v in zip(x, data, strict=True) if v is not None]
    last_at, last = drawn[-1]
    typical = statistics.median(v for _, v in drawn[:-1])
    assert last > 5 * typical, (chart["id"], last, typical)
    ends = chart["spec"].get("xEnd") or x
    assert now_ms - ends[len(x) - 1] < 3 * MINUTE_MS, chart["id"]  # the newest minutes are on the chart


def assert_bins_then_the_last_minutes_per_snapshot(chart: dict) -> int:
    """A day of a server: 10-minute bins, then the bins that hold its last 10 minutes drawn snapshot by snapshot
    (a snapshot a minute here: one to twenty points, none longer than two minutes). The bins' count."""
    spans = [b - a for a, b in zip(chart["spec"]["x"], chart["spec"]["xEnd"], strict=True)]
    bins = next(i for i, span in enumerate(spans) if span != 10 * MINUTE_MS)
    tail = spans[bins:]
    assert 1 <= len(tail) <= 21 and all(span <= 2 * MINUTE_MS for span in tail), (chart["id"], tail)
    return bins


def test_every_range_of_the_server_page(console_page, stormy):
    server, at = stormy
    page, now_ms = console_page, at["now"].timestamp() * 1000
    outage_ms = [t.timestamp() * 1000 for t in at["outage"]]
    counts = {}
    for rng in ("1h", "6h", "24h", "7d", "30d"):
        got = charts(page, f"/servers/{server.pk}/?range={rng}")
        calls = got["chart-calls"]
        x, data = calls["spec"]["x"], values(calls)
        counts[rng] = len(x)
        # What Chart.js counts as drawn is the values that are not gaps.
        assert calls["drawn"] == sum(v is not None for v in data), rng
        assert_storm_at_the_right_edge(calls, now_ms)
        assert_storm_at_the_right_edge(got["chart-time"], now_ms)
        ends = calls["spec"]["xEnd"]
        assert all(a < b for a, b in zip(x, ends, strict=True)) and x == sorted(x), rng
        if rng == "6h":
            # Raw snapshots: the one after the outage covers it, as one flat step from its start to its end.
            spans = [(a, b) for a, b, v in zip(x, ends, data, strict=True) if b - a > 10 * MINUTE_MS]
            assert len(spans) == 1 and abs(spans[0][0] - outage_ms[0]) <= 2 * MINUTE_MS, spans
            assert abs(spans[0][1] - outage_ms[1]) <= 2 * MINUTE_MS, spans
        if rng == "24h":
            # 10-minute bins: those of the outage have no snapshot and are null, a break in the line.
            gaps = [a for a, v in zip(x, data, strict=True) if v is None and outage_ms[0] <= a < outage_ms[1]]
            assert 8 <= len(gaps) <= 9
            assert_bins_then_the_last_minutes_per_snapshot(calls)
    assert 55 <= counts["1h"] <= 61  # every snapshot: the finest the history holds
    assert 100 <= counts["6h"] <= 400 and 100 <= counts["24h"] <= 400, counts
    # Hours over a week, 2-hour points over a month, each with the hour (or two) in progress per snapshot.
    # (the last 10 minutes are always per snapshot: in the first minutes of an hour, the hour before too)
    assert 166 <= counts["7d"] <= 168 + 71 and 355 <= counts["30d"] <= 361 + 71, counts


def test_the_statement_and_planning_pages_at_24_hours(console_page, stormy):
    server, at = stormy
    page, now_ms = console_page, at["now"].timestamp() * 1000
    hot = top_statements(
        server_id=server.pk, window=Window(at["now"] - timedelta(hours=2), at["now"]), order="calls", page=Page(1, 1)
    ).rows[0]
    got = charts(page, f"/statements/{hot.statement_id}/")  # 24 h by default
    calls = next(c for c in got.values() if c["spec"]["unit"] == "calls/s")
    x = calls["spec"]["x"]
    # Hours, the last one snapshot by snapshot: the statement's storm shows a minute after it began, where the
    # hour's average would have hidden it (six empty charts before).
    hours = [a for a, b in zip(x, calls["spec"]["xEnd"], strict=True) if b - a == 60 * MINUTE_MS]
    assert 22 <= len(hours) <= 25 and len(x) - len(hours) >= 1
    assert_storm_at_the_right_edge(calls, now_ms)
    planning = charts(page, f"/servers/{server.pk}/planning/")
    time = planning["chart-plan-time"]
    assert 138 <= assert_bins_then_the_last_minutes_per_snapshot(time) <= 145  # the server's 10-minute bins
    assert_storm_at_the_right_edge(time, now_ms)
