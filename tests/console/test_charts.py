"""console.charts: the data every chart reads — times as epoch milliseconds, values rounded to 6 decimals with None
kept as a gap, span ends only when each point has one, the hit ratio in percent on a 0-100 axis, and the charts
every page draws alike (calls, execution and planning) on a page's time axis."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest

from console.charts import (
    EXEC_COLOR,
    HIT_COLOR,
    PLAN_COLOR,
    Chart,
    Series,
    calls_chart,
    epoch_ms,
    hit_ratio_chart,
    split_chart,
    time_axis,
    time_chart,
)

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
XS = [T0 + timedelta(minutes=5 * i) for i in range(3)]


def test_epoch_ms_is_the_same_instant_in_any_zone():
    assert epoch_ms(datetime(1970, 1, 1, tzinfo=UTC)) == 0
    assert epoch_ms(T0) == int(T0.timestamp()) * 1000
    assert epoch_ms(T0.astimezone(timezone(timedelta(hours=-5)))) == epoch_ms(T0)
    assert epoch_ms(T0 + timedelta(milliseconds=1)) - epoch_ms(T0) == 1


def test_a_chart_of_points_with_a_gap():
    spec = time_chart(x=XS, series=[Series("exec", [1, None, 1 / 3], "#000")], unit="ms")
    assert spec == {
        "kind": "line",
        "unit": "ms",
        "stacked": False,
        "spark": False,
        "x": [epoch_ms(t) for t in XS],
        "series": [{"label": "exec", "data": [1.0, None, 0.333333], "color": "#000"}],
        "markers": [],
    }


def test_span_ends_markers_range_and_y_max_appear_only_when_given():
    ends = [t + timedelta(minutes=4) for t in XS]
    spec = time_chart(
        x=XS,
        x_end=ends,
        series=[Series("a", [0, 0, 0]), Series("b", [None] * 3)],
        unit="calls/s",
        stacked=True,
        kind="bar",
        markers=[(XS[1], "max changed")],
        x_range=(T0 - timedelta(hours=1), T0 + timedelta(hours=1)),
        y_max=50,
    )
    assert spec["xEnd"] == [epoch_ms(t) for t in ends]
    assert spec["markers"] == [{"x": epoch_ms(XS[1]), "label": "max changed"}]
    assert (spec["xMin"], spec["xMax"]) == (epoch_ms(T0) - 3_600_000, epoch_ms(T0) + 3_600_000)
    assert (spec["yMax"], spec["kind"], spec["stacked"]) == (50, "bar", True)
    assert [s["data"] for s in spec["series"]] == [[0.0, 0.0, 0.0], [None, None, None]]


def test_span_ends_must_match_the_points():
    with pytest.raises(ValueError, match="^2 span ends for 3 points$"):
        time_chart(x=XS, x_end=XS[:2], series=[], unit="ms")


def test_hit_ratio_in_percent_with_gaps_kept():
    chart = hit_ratio_chart([1.0, None, 0.995, 0.0], x=XS + [XS[-1] + timedelta(minutes=5)])
    assert isinstance(chart, Chart) and chart.note == ""
    assert (chart.id, chart.title) == ("chart-hit", "Shared buffer hit ratio")
    assert (chart.spec["unit"], chart.spec["yMax"]) == ("%", 100)
    [series] = chart.spec["series"]
    assert series == {"label": "hit ratio", "data": [100.0, None, 99.5, 0.0], "color": HIT_COLOR}


def test_hit_ratio_takes_the_pages_time_axis():
    ends = [t + timedelta(minutes=5) for t in XS]
    chart = hit_ratio_chart([0.5, 0.5, None], x=XS, x_end=ends, markers=[(XS[0], "reset")])
    assert chart.spec["x"] == [epoch_ms(t) for t in XS] and chart.spec["xEnd"] == [epoch_ms(t) for t in ends]
    assert chart.spec["markers"] == [{"x": epoch_ms(XS[0]), "label": "reset"}]


@dataclass(frozen=True)
class Point:
    start: datetime
    end: datetime


def test_a_pages_time_axis_spans_each_point_over_the_range_with_its_markers():
    points = [Point(t, t + timedelta(minutes=4)) for t in XS]
    axis = time_axis(points, (T0, T0 + timedelta(hours=1)), [(XS[1], "reset")])
    spec = calls_chart([1, None, 2], **axis).spec
    assert spec["x"] == [epoch_ms(t) for t in XS] and spec["xEnd"] == [epoch_ms(p.end) for p in points]
    assert (spec["xMin"], spec["xMax"]) == (epoch_ms(T0), epoch_ms(T0) + 3_600_000)
    assert spec["markers"] == [{"x": epoch_ms(XS[1]), "label": "reset"}]
    assert spec["series"] == [{"label": "calls/s", "data": [1.0, None, 2.0], "color": EXEC_COLOR}]


def test_execution_and_planning_read_the_same_on_every_page_with_planning_not_tracked_a_gap():
    chart = split_chart(
        "chart-x",
        "Time",
        [2, 3, None],
        [None, 1, None],
        unit="ms/s",
        plan_label="planning (not tracked)",
        note="n",
        stacked=True,
        x=XS,
    )
    assert (chart.id, chart.title, chart.note, chart.spec["unit"], chart.spec["stacked"]) == (
        "chart-x",
        "Time",
        "n",
        "ms/s",
        True,
    )
    assert chart.spec["series"] == [
        {"label": "execution", "data": [2.0, 3.0, None], "color": EXEC_COLOR},
        {"label": "planning (not tracked)", "data": [None, 1.0, None], "color": PLAN_COLOR},
    ]
