"""Charts as PNG images, rendered in the task (matplotlib, no display): inline in the weekly mail (so
they show where remote images are blocked) and in the audit PDF. Gaps stay gaps (None breaks the line)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import datetime

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display here, and none in a worker
import matplotlib.dates as mdates  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

# The console's palette (static/console/console.js), so a chart looks the same in the mail and the PDF.
COLOURS = ("#2f5fb3", "#d9822b", "#3c9a5f", "#b3261e", "#7b2fb3", "#0f8b8d", "#8a6d3b", "#6b7280")
DPI = 100


@dataclass(frozen=True)
class Line:
    label: str
    points: list[tuple[datetime, float | None]]


def _values(points: list[tuple[datetime, float | None]]) -> tuple[list[datetime], list[float]]:
    return [t for t, _ in points], [float("nan") if v is None else v for _, v in points]


def chart_png(lines: list[Line], *, title: str, unit: str, stacked: bool = False, width_px: int = 600,
              height_px: int = 220, time_zone=None) -> bytes:  # fmt: skip
    """A line chart (or stacked areas) of `lines` over time, as PNG bytes. `time_zone` (a tzinfo) labels the
    axis in the reader's zone; the points themselves are UTC-aware."""
    fig = Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI)
    ax = fig.add_subplot()
    if stacked and lines:
        times, _ = _values(lines[0].points)
        ys = [_values(line.points)[1] for line in lines]  # NaN: a gap stays a hole, not a zero
        ax.stackplot(times, ys, labels=[line.label for line in lines], colors=COLOURS[: len(lines)], alpha=0.85,
                     step="post")  # fmt: skip
    else:
        for i, line in enumerate(lines):
            times, values = _values(line.points)
            ax.plot(times, values, label=line.label, color=COLOURS[i % len(COLOURS)], linewidth=1.4)
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_ylabel(unit, fontsize=8)
    ax.set_ylim(bottom=0)
    ax.margins(x=0)
    ax.grid(True, color="#e5e7eb", linewidth=0.6)
    ax.tick_params(labelsize=7)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    locator = mdates.AutoDateLocator(tz=time_zone, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=time_zone))
    fig.tight_layout(pad=0.4)
    if len(lines) > 1:  # on the title's line, right-aligned: never over the data
        fig.legend(fontsize=7, frameon=False, loc="upper right", ncols=min(len(lines), 4))
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=DPI)
    return out.getvalue()
