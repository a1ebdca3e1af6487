"""The server page in a real browser: its six charts drawn with data, the range picker kept in the URL,
and its top-statements table sorted and filtered through htmx with the URL following and the back
button restoring the previous state. A statement text containing markup renders as text."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from devenv.browser import fully_drawn_ms
from inventory.models import Server
from tests.browser.conftest import HOSTILE_TEXT, assert_charts_drawn

CHARTS = {"chart-time", "chart-calls", "chart-dealloc", "chart-waits", "chart-entries", "chart-hit"}


@pytest.fixture
def server(synthetic_server) -> Server:
    return synthetic_server("db-main", n=30, texts={0: HOSTILE_TEXT})


def table_rows(page: Page):
    return page.locator("#top-statements table.statements tbody tr[data-statement]")


def column(page: Page, css_index: int) -> list[float]:
    """The numbers in the table's css_index-th cell (1-based) of every row."""
    texts = table_rows(page).locator(f"td:nth-child({css_index})").all_inner_texts()
    return [float(t.split()[0].replace(",", "")) for t in texts]


def test_every_chart_is_drawn_and_the_range_is_kept_in_the_url(console_page, server):
    page = console_page
    drawn_ms = fully_drawn_ms(page, f"/servers/{server.pk}/")
    assert 0 < drawn_ms < 10_000  # the budget (1.5 s) is measured on the demo by the benchmark, not here
    expect(page.get_by_role("heading", name="db-main")).to_be_visible()
    expect(page.locator(".ranges a.active")).to_have_text("24h")
    assert set(assert_charts_drawn(page, at_least=6)) == CHARTS

    page.get_by_role("link", name="6h", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/servers/{server.pk}/\?(.*&)?range=6h"))
    expect(page.locator(".ranges a.active")).to_have_text("6h")
    six_hours = assert_charts_drawn(page, at_least=6)
    assert set(six_hours) == CHARTS
    page.go_back()
    expect(page.locator(".ranges a.active")).to_have_text("24h")


def test_sorting_and_filtering_the_top_statements(console_page, server):
    page = console_page
    page.goto(f"/servers/{server.pk}/")
    expect(table_rows(page).first).to_be_visible()
    ran = table_rows(page).count()  # the statements that ran in the last 24 hours
    assert ran > 10
    page.evaluate("window.sameDocument = true")  # gone if the browser loaded a new document

    page.locator("#top-statements thead").get_by_role("link", name="Calls", exact=True).click()
    expect(page).to_have_url(re.compile(r"order=calls"))
    expect(page.locator("#top-statements th a.sorted")).to_contain_text("Calls")
    calls = column(page, 4)
    assert calls == sorted(calls, reverse=True) and calls[0] > calls[-1]

    page.get_by_label("Text contains").fill("orders")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"q=orders"))
    expect(page).to_have_url(re.compile(r"order=calls"))
    filtered = table_rows(page).count()
    assert 0 < filtered < ran
    # The cell shows the start of the text; its title holds more of it (the match may lie past the start).
    titles = table_rows(page).locator("td.query-cell a").evaluate_all("as => as.map(a => a.title)")
    assert all("orders" in t.lower() for t in titles), titles
    assert page.evaluate("window.sameDocument === true")

    page.go_back()
    expect(page).not_to_have_url(re.compile(r"q=orders"))
    expect(page).to_have_url(re.compile(r"order=calls"))
    expect(table_rows(page)).to_have_count(ran)
    page.go_back()
    expect(page).not_to_have_url(re.compile(r"order="))
    expect(page.locator("#top-statements th a.sorted")).to_contain_text("Total time")
    assert_charts_drawn(page, at_least=6)  # the page restored from history has its charts again


def test_a_statement_text_with_markup_renders_as_text(console_page, server):
    page = console_page
    page.goto(f"/servers/{server.pk}/?q=pwned")
    cell = table_rows(page).locator("td.query-cell")
    expect(cell).to_have_count(1)
    expect(cell).to_contain_text("<script>window.pwned = 1</script>")
    assert page.locator("#top-statements script, #top-statements img").count() == 0
    assert page.evaluate("window.pwned === undefined")


def test_another_organizations_server_is_not_found_in_the_consoles_look(console_page, synthetic_server, console_log):
    other = synthetic_server("db-globex", org="globex", n=5, hours=2)
    console_log.allow(r"status of 404 \(Not Found\) \(.*/servers/\d+/\)$")
    page = console_page
    response = page.goto(f"/servers/{other.pk}/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("navigation").get_by_role("link", name="Fleet")).to_be_visible()
    expect(page.get_by_text("db-globex")).to_have_count(0)


AXES = """() => [...document.querySelectorAll('canvas[data-chart]')].map(c => {
    const chart = Chart.getChart(c);
    return {id: c.dataset.chart, x: chart.scales.x.ticks.map(t => t.value),
            xLabels: chart.scales.x.ticks.map(t => t.label), yLabels: chart.scales.y.ticks.map(t => t.label)};
})"""

# A chart added as a page's htmx swap adds one (its data in a json_script, its canvas naming it); resolves, once
# drawn, to what Chart.js holds: the values it counts, the points it draws, and how many of them it skips.
ADD_CHART = """([id, spec]) => {
    const data = document.createElement('script');
    data.type = 'application/json'; data.id = id;
    data.textContent = JSON.stringify({kind: 'line', stacked: false, spark: false, markers: [], ...spec});
    const box = document.createElement('div');
    box.style.cssText = 'width: 640px; height: 240px';
    box.innerHTML = `<canvas data-chart="${id}"></canvas>`;
    document.body.append(data, box);
    htmx.trigger(box, 'htmx:load', {elt: box});
    return new Promise(done => requestAnimationFrame(() => {
        const canvas = box.querySelector('canvas'), chart = Chart.getChart(canvas);
        done({drawn: canvas.dataset.drawn, points: chart.data.datasets[0].data.map(p => [p.x, p.y]),
              skipped: chart.getDatasetMeta(0).data.filter(e => e.skip).length});
    }));
}"""


def add_chart(page, chart_id: str, *, x, values, unit: str, x_end=None) -> dict:
    spec = {"unit": unit, "x": x, "series": [{"label": unit, "data": values, "color": None}]}
    if x_end is not None:
        spec["xEnd"] = x_end
    return page.evaluate(ADD_CHART, [chart_id, spec])


def test_axes_tick_at_round_times_with_labels_that_never_repeat(console_page, server):
    page = console_page
    page.goto(f"/servers/{server.pk}/")  # 24 h, the reader's time zone UTC
    assert_charts_drawn(page, at_least=6)
    end = int(page.evaluate("Date.now()") // 60_000 * 60_000 + 17 * 60_000)
    x = [end - 24 * 3_600_000 + i * 3_600_000 for i in range(25)]
    # Tiny values over 24 hours ending at an odd minute.
    tiny = add_chart(page, "tiny", x=x, values=[0.0005 + 0.0001 * (i % 26) for i in range(25)], unit="dealloc/s")
    assert tiny["drawn"] == "25"
    axes = page.evaluate(AXES)
    assert {a["id"] for a in axes} == CHARTS | {"tiny"}
    for a in axes:
        # Every three hours on the hour, at most 8 of them, each named once; y labels distinct.
        assert 5 <= len(a["x"]) <= 8, a
        assert all(v % (3 * 3_600_000) == 0 for v in a["x"]), a
        assert all(re.fullmatch(r"\d\d:00", label) for label in a["xLabels"]), a
        assert len(set(a["xLabels"])) == len(a["xLabels"]) and len(set(a["yLabels"])) == len(a["yLabels"]), a
    tiny = next(a for a in axes if a["id"] == "tiny")
    assert len(tiny["yLabels"]) >= 4 and all(re.fullmatch(r"0\.\d{4}", label) for label in tiny["yLabels"]), tiny


def test_an_outage_is_drawn_as_a_step_across_it_or_a_break_never_a_ramp(console_page, server):
    page = console_page
    page.goto(f"/servers/{server.pk}/")
    m = 60_000
    # Across an outage (the third snapshot's interval covers it): drawn flat at its average, 40, from 2 to 32.
    got = add_chart(
        page,
        "across",
        x=[0, m, 2 * m, 32 * m],
        x_end=[m, 2 * m, 32 * m, 33 * m],
        values=[100, 110, 40, 120],
        unit="calls/s",
    )
    assert got["drawn"] == "4"  # four values: what the chart shows, not the points it draws them with
    steps = [[0, 100], [m, 100], [m, 110], [2 * m, 110], [2 * m, 40], [32 * m, 40], [32 * m, 120], [33 * m, 120]]
    assert got["points"] == steps
    # After a new baseline nothing covers the outage: a null point between the spans, the line broken there.
    got = add_chart(page, "broken", x=[0, m, 32 * m], x_end=[m, 2 * m, 33 * m], values=[100, 110, 120], unit="calls/s")
    steps = [[0, 100], [m, 100], [m, 110], [2 * m, 110], [17 * m, None], [32 * m, 120], [33 * m, 120]]
    assert got["points"] == steps
    assert got["skipped"] == 1
