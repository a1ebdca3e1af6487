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
