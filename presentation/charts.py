"""Charts as PNG images, rendered in the task (matplotlib, no display): inline in the weekly mail (so
they show where remote images are blocked) and in the audit PDF. Gaps stay gaps (None breaks the line)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import datetime

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display here, and none in a worker
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.ticker as mticker  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

# The console's palette (static/console/console.js), so a chart looks the same in the mail and the PDF.
COLOURS = ("#2f5fb3", "#d9822b", "#3c9a5f", "#b3261e", "#7b2fb3", "#0f8b8d", "#8a6d3b", "#6b7280")
DPI = 100
MARGIN_PX = {"left": 52, "right": 20, "bottom": 36}  # right: half a date label ("Nov-11") at the end
TITLE_ROW_PX, LEGEND_ROW_PX = 20, 13
CHAR_PX = 4.3  # a 7-point character, wide enough for DejaVu Sans
LEGEND_ENTRY_PX = 36  # the handle and the spacing of one legend entry


def _legend_grid(labels: list[str], width_px: int) -> tuple[int, int]:
    """(columns, rows) of the legend: as many equal columns as the widest label lets fit; none for one line."""
    if len(labels) < 2:
        return 0, 0
    column_px = CHAR_PX * max(len(label) for label in labels) + LEGEND_ENTRY_PX
    columns = max(1, min(len(labels), int(width_px // column_px)))
    return columns, -(-len(labels) // columns)


def _compact(value: float, _position=None) -> str:
    """A y tick as at most five characters (250k, 1.2M, 0.25), so the fixed left margin always holds it."""
    for divisor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= divisor:
            return f"{value / divisor:.3g}{suffix}"
    return f"{value:.3g}"


@dataclass(frozen=True)
class Line:
    label: str
    points: list[tuple[datetime, float | None]]
    # Where each point's span ends (its time is where it starts): the value is drawn flat across its span (an
    # hour, or a snapshot's interval over an outage), and the line breaks where a span does not meet the next
    # one, as the console draws it (static/console/console.js).
    ends: list[datetime] | None = None


def _values(line: Line) -> tuple[list[datetime], list[float]]:
    nan = float("nan")
    if line.ends is None:
        return [t for t, _ in line.points], [nan if v is None else v for _, v in line.points]
    times: list[datetime] = []
    values: list[float] = []
    for i, ((start, v), end) in enumerate(zip(line.points, line.ends, strict=True)):
        if i and start > line.ends[i - 1]:  # nothing between them: a hole
            times.append(line.ends[i - 1] + (start - line.ends[i - 1]) / 2)
            values.append(nan)
        y = nan if v is None else v
        times += [start, end]
        values += [y, y]
    return times, values


def chart_png(
    lines: list[Line],
    *,
    title: str,
    unit: str,
    stacked: bool = False,
    width_px: int = 600,
    height_px: int = 220,
    time_zone=None,
) -> bytes:
    """A line chart (or stacked areas) of `lines` over time, as PNG bytes. `time_zone` (a tzinfo) labels the
    axis in the reader's zone; the points themselves are UTC-aware."""
    fig = Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI)
    ax = fig.add_subplot()
    if stacked and lines:
        times, _ = _values(lines[0])
        ys = [_values(line)[1] for line in lines]  # NaN: a gap stays a hole, not a zero
        # Lines with their spans are steps already; without, each point holds until the next.
        step = None if lines[0].ends is not None else "post"
        labels = [line.label for line in lines]
        ax.stackplot(times, ys, labels=labels, colors=COLOURS[: len(lines)], alpha=0.85, step=step)
    else:
        for i, line in enumerate(lines):
            times, values = _values(line)
            ax.plot(times, values, label=line.label, color=COLOURS[i % len(COLOURS)], linewidth=1.4)
    ax.set_ylim(bottom=0)
    ax.margins(x=0)
    ax.grid(True, color="#e5e7eb", linewidth=0.6)
    ax.tick_params(labelsize=7)
    ax.yaxis.set_major_formatter(mticker.FuncFormatter(_compact))
    ax.xaxis.get_offset_text().set_fontsize(7)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    locator = mdates.AutoDateLocator(tz=time_zone, minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=time_zone))
    # Fixed margins in pixels, not tight_layout (which measured every text first: a third of a chart's time):
    # the title's row, the legend's rows under it (never over the data), five-character tick labels and
    # the unit on the left, the two-line date axis below.
    left, right = MARGIN_PX["left"] / width_px, 1 - MARGIN_PX["right"] / width_px
    columns, rows = _legend_grid([line.label for line in lines], width_px - MARGIN_PX["left"] - MARGIN_PX["right"])
    top_px = TITLE_ROW_PX + LEGEND_ROW_PX * rows + 4
    fig.subplots_adjust(left=left, right=right, bottom=MARGIN_PX["bottom"] / height_px, top=1 - top_px / height_px)
    fig.text(left, 1 - 3 / height_px, title, fontsize=10, ha="left", va="top")
    bottom_px = MARGIN_PX["bottom"]
    middle = (bottom_px + (height_px - top_px - bottom_px) / 2) / height_px
    fig.text(3 / width_px, middle, unit, fontsize=8, rotation=90, ha="left", va="center")  # the tick labels' left
    if rows:
        fig.legend(
            fontsize=7,
            frameon=False,
            loc="upper left",
            ncols=columns,
            borderaxespad=0,
            borderpad=0,
            bbox_to_anchor=(left, 1 - TITLE_ROW_PX / height_px),
            handlelength=1.5,
            columnspacing=1.2,
        )
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=DPI)
    return out.getvalue()
