"""Chart data for static/console/console.js, built in one place so that every chart reads the same
way: times as epoch milliseconds (the browser shows them in the user's time zone), None as a gap, a
unit on every y axis, and the configuration changes marked on the time axis."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

EXEC_COLOR = "#2f5fb3"
PLAN_COLOR = "#d9822b"
HIT_COLOR = "#3c9a5f"


@dataclass(frozen=True)
class Series:
    label: str
    data: Sequence[float | None]
    color: str | None = None


@dataclass(frozen=True)
class Chart:
    """A chart of a page: the json_script element's id, its title, its data (None: nothing to draw, the
    note says why)."""

    id: str
    title: str
    spec: dict | None
    note: str = ""


def epoch_ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def time_chart(
    *,
    x: Sequence[datetime],
    series: Sequence[Series],
    x_end: Sequence[datetime] | None = None,
    unit: str,
    stacked: bool = False,
    kind: str = "line",
    markers: Sequence[tuple[datetime, str]] = (),
    x_range: tuple[datetime, datetime] | None = None,
    y_max: float | None = None,
    spark: bool = False,
) -> dict:
    """The JSON for one chart (pass it to the template's json_script). `x_end`: where each value's span ends
    (x is where it starts): the value is drawn flat across its span, and the line breaks where one span does
    not meet the next (a collection gap), never a ramp through time nobody watched."""
    spec = {
        "kind": kind,
        "unit": unit,
        "stacked": stacked,
        "spark": spark,
        "x": [epoch_ms(t) for t in x],
        "series": [
            {"label": s.label, "data": [None if v is None else round(float(v), 6) for v in s.data], "color": s.color}
            for s in series
        ],
        "markers": [{"x": epoch_ms(t), "label": label} for t, label in markers],
    }
    if x_end is not None:
        if len(x_end) != len(x):
            raise ValueError(f"{len(x_end)} span ends for {len(x)} points")
        spec["xEnd"] = [epoch_ms(t) for t in x_end]
    if x_range is not None:
        spec["xMin"], spec["xMax"] = epoch_ms(x_range[0]), epoch_ms(x_range[1])
    if y_max is not None:
        spec["yMax"] = y_max
    return spec


class Spanned(Protocol):
    start: datetime
    end: datetime


def time_axis(
    points: Sequence[Spanned], window_range: tuple[datetime, datetime], markers: Sequence[tuple[datetime, str]] = ()
) -> dict:
    """A page's time axis, time_chart's common arguments: each point drawn flat across the time it covers (a
    bucket, or a snapshot's interval), over the range shown, with the page's markers."""
    return {
        "x": [p.start for p in points],
        "x_end": [p.end for p in points],
        "x_range": window_range,
        "markers": list(markers),
    }


def calls_chart(calls_per_s: Sequence[float | None], **axis) -> Chart:
    """Calls per second, on a server's page and a statement's alike."""
    return Chart(
        "chart-calls",
        "Calls per second",
        time_chart(series=[Series("calls/s", calls_per_s, EXEC_COLOR)], unit="calls/s", **axis),
    )


def split_chart(
    id: str,
    title: str,
    execution: Sequence[float | None],
    planning: Sequence[float | None],
    *,
    unit: str,
    plan_label: str = "planning",
    stacked: bool = False,
    note: str = "",
    **axis,
) -> Chart:
    """Execution and planning side by side (stacked: the database time they add up to), in the same colours and
    words on every page; planning None where it was not tracked (a gap, never 0)."""
    series = [Series("execution", execution, EXEC_COLOR), Series(plan_label, planning, PLAN_COLOR)]
    return Chart(id, title, time_chart(series=series, unit=unit, stacked=stacked, **axis), note)


def hit_ratio_chart(ratios: Sequence[float | None], **common) -> Chart:
    """The shared buffer hit ratio (0-1 per point, None where nothing was read) in percent, on a server's page
    and a statement's alike; `common`: the page's time axis (time_chart's x, x_end, markers, x_range)."""
    percent = [None if r is None else r * 100 for r in ratios]
    return Chart(
        "chart-hit",
        "Shared buffer hit ratio",
        time_chart(series=[Series("hit ratio", percent, HIT_COLOR)], unit="%", y_max=100, **common),
    )
