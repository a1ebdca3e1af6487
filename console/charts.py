"""Chart data for static/console/console.js, built in one place so that every chart reads the same
way: times as epoch milliseconds (the browser shows them in the user's time zone), None as a gap, a
unit on every y axis, and the configuration changes marked on the time axis."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

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


def hit_ratio_chart(ratios: Sequence[float | None], **common) -> Chart:
    """The shared buffer hit ratio (0-1 per point, None where nothing was read) in percent, on a server's page
    and a statement's alike; `common`: the page's time axis (time_chart's x, x_end, markers, x_range)."""
    percent = [None if r is None else r * 100 for r in ratios]
    return Chart(
        "chart-hit",
        "Shared buffer hit ratio",
        time_chart(series=[Series("hit ratio", percent, HIT_COLOR)], unit="%", y_max=100, **common),
    )
