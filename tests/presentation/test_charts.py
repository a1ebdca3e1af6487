"""The report charts (matplotlib, Agg) as pixels: the asked size, nothing drawn past the image's edges with
large values and a two-row legend (the margins are fixed, not measured), and a gap left as a hole."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from PIL import Image

from presentation.charts import COLOURS, Line, _compact, chart_png

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _image(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB")


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (0.25, "0.25"), (12.5, "12.5"), (999, "999"), (250_000, "250k"), (1_250_000, "1.25M"), (3e9, "3G")],
)
def test_tick_labels_are_compact(value, text):
    assert _compact(value) == text


@pytest.mark.parametrize("stacked", [False, True])
def test_nothing_is_drawn_past_the_edges(stacked):
    points = [(T0 + timedelta(hours=i), 987_654.3 * (1 + i % 24)) for i in range(168)]
    lines = [Line(f"a long label {k}", points) for k in range(6)]
    image = _image(
        chart_png(
            lines,
            title="rep-main: database time per second, 2025-W01 (Europe/Paris)",
            unit="ms/s",
            stacked=stacked,
            time_zone=ZoneInfo("Europe/Paris"),
        )
    )
    assert image.size == (600, 220)
    width, height = image.size
    border = [(x, 0) for x in range(width)] + [(x, height - 1) for x in range(width)]
    border += [(0, y) for y in range(height)] + [(width - 1, y) for y in range(height)]
    assert {image.getpixel(p) for p in border} == {(255, 255, 255)}


def test_a_date_label_at_the_end_fits():
    end = datetime(2026, 11, 10, 23, tzinfo=UTC)  # midnight in Paris: the last tick is the day's label
    points = [(end - timedelta(minutes=10 * i), 40.0 + i) for i in range(126)][::-1]
    image = _image(
        chart_png(
            [Line("dealloc/s", points)],
            title="dealloc/s",
            unit="/s",
            width_px=900,
            height_px=240,
            time_zone=ZoneInfo("Europe/Paris"),
        )
    )
    assert {image.getpixel((899, y)) for y in range(240)} == {(255, 255, 255)}


def test_a_gap_stays_a_hole():
    hours = 90
    points = [(T0 + timedelta(hours=i), None if 30 <= i < 60 else 5.0) for i in range(hours)]
    image = _image(chart_png([Line("calls/s", points)], title="calls", unit="/s", width_px=900))
    colour = tuple(int(COLOURS[0][i : i + 2], 16) for i in (1, 3, 5))

    def drawn(x: int) -> bool:
        return any(_near(image.getpixel((x, y)), colour) for y in range(image.size[1]))

    columns = [x for x in range(image.size[0]) if drawn(x)]
    left, right = min(columns), max(columns)
    span = right - left
    assert not any(drawn(x) for x in range(left + span * 36 // 100, left + span * 64 // 100))
    assert drawn(left + span // 6) and drawn(right - span // 6)


def _near(pixel: tuple[int, int, int], colour: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 40 for a, b in zip(pixel, colour, strict=True))


def _line_rows(image: Image.Image, x: int, colour) -> list[int]:
    return [y for y in range(image.size[1]) if _near(image.getpixel((x, y)), colour)]


def test_a_point_covering_an_outage_is_a_flat_step_across_it_and_spans_that_do_not_meet_are_a_hole():
    colour = tuple(int(COLOURS[0][i : i + 2], 16) for i in (1, 3, 5))
    hour = timedelta(hours=1)
    before = [(T0 + i * hour, T0 + (i + 1) * hour, 5.0) for i in range(30)]
    after = [(T0 + (60 + i) * hour, T0 + (61 + i) * hour, 5.0) for i in range(30)]
    across = (T0 + 30 * hour, T0 + 60 * hour, 2.0)  # the snapshot after a 30-hour outage: its average over it
    for spans, flat in ((before + [across] + after, True), (before + after, False)):
        line = Line("calls/s", [(start, v) for start, _, v in spans], [end for _, end, _ in spans])
        image = _image(chart_png([line], title="calls", unit="/s", width_px=900))
        columns = [x for x in range(image.size[0]) if _line_rows(image, x, colour)]
        left, right = min(columns), max(columns)
        span = right - left
        middle = range(left + span * 38 // 100, left + span * 62 // 100)
        if flat:  # one height all across the outage, below the 5.0 on either side: a step, never a ramp
            heights = {tuple(_line_rows(image, x, colour)) for x in middle}
            assert len(heights) == 1 and min(next(iter(heights))) > max(_line_rows(image, left + span // 6, colour))
        else:
            assert not any(_line_rows(image, x, colour) for x in middle)
