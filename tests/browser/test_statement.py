"""The statement page in a real browser: opened from the server's top statements, its text highlighted
and escaped (a text containing markup is shown, never run), its charts drawn with data over the range
in the URL, and the same queryid on the organization's other servers one click away."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from inventory.models import Server
from tests.browser.conftest import HOSTILE_TEXT, assert_charts_drawn

N = 30
# Every text carries markup, so that the busiest statement (one that ran in every range) has it.
TEXTS = {i: f"{HOSTILE_TEXT} /* q{i} */" for i in range(N)}


@pytest.fixture
def servers(synthetic_server) -> tuple[Server, Server]:
    """Two servers of acme that ran the same statements (same queryids)."""
    return synthetic_server("db-main", n=N, texts=TEXTS), synthetic_server("db-replica", n=N, texts=TEXTS)


def test_a_statement_opens_from_the_top_statements_with_its_text_escaped(console_page, servers):
    main, replica = servers
    page = console_page
    page.goto(f"/servers/{main.pk}/?range=24h&order=calls")
    first = page.locator("#top-statements td.query-cell a").first
    text = first.get_attribute("title")
    first.click()
    expect(page).to_have_url(re.compile(r"/statements/\d+/\?range=24h$"))
    expect(page.get_by_role("heading", name=re.compile(r"^Statement"))).to_be_visible()

    sql = page.locator("pre.sql")
    expect(sql).to_have_text(text)
    assert text.startswith(HOSTILE_TEXT)
    expect(sql.locator(".kw").first).to_have_text("SELECT")  # highlighted ...
    assert sql.locator("script, img").count() == 0  # ... and escaped
    assert page.evaluate("window.pwned === undefined")
    charts = assert_charts_drawn(page, at_least=4)
    assert "chart-calls" in charts

    page.get_by_role("link", name="6h", exact=True).click()
    expect(page).to_have_url(re.compile(r"range=6h"))
    expect(page.locator(".ranges a.active")).to_have_text("6h")
    assert_charts_drawn(page, at_least=4)

    elsewhere = page.locator(".statement-elsewhere")
    expect(elsewhere.get_by_role("link")).to_have_text(["db-replica"])
    elsewhere.get_by_role("link", name="db-replica").click()
    expect(page.locator(".statement-head")).to_contain_text("db-replica")
    expect(page.locator("pre.sql")).to_have_text(text)
    assert_charts_drawn(page, at_least=4)
