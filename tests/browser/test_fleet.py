"""The fleet page in a real browser: the visible servers with their figures and sparklines, failing
ones first, filters and sorting as htmx swaps with the state in the URL and the back button working,
and a server opened from its row."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from advisor.models import Recommendation
from inventory.models import Server
from tests.browser.conftest import assert_charts_drawn

HOSTILE_ERROR = 'could not connect: <script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2">'


@pytest.fixture
def fleet(synthetic_server) -> dict[str, Server]:
    """Two servers of acme with a day of history (one of them failing now) and one of globex."""
    servers = {
        "db-main": synthetic_server("db-main", n=12),
        "db-broken": synthetic_server("db-broken", n=12),
        "db-globex": synthetic_server("db-globex", org="globex", n=12),
    }
    Server.objects.filter(pk=servers["db-broken"].pk).update(
        consecutive_failures=2,
        last_attempt_at=timezone.now(),
        last_error_class="connection",
        last_error_message=HOSTILE_ERROR,
    )
    # The demo's widest cells: tags after the name, one critical and three warnings.
    Server.objects.filter(pk=servers["db-main"].pk).update(tags=["production", "eu-west"])
    now = timezone.now()
    for i, severity in enumerate(("critical", "warning", "warning", "warning")):
        Recommendation.objects.create(
            server=servers["db-main"],
            rule=f"rule{i}",
            subject="server",
            subject_key="server",
            severity=severity,
            title=f"Advice {i}",
            explanation="",
            first_seen_at=now,
            opened_at=now,
            last_seen_at=now,
            status="open",
        )
    return servers


def rows(page: Page) -> list[str]:
    return page.locator("table.fleet-table tbody tr[data-server] td.server-cell a").all_inner_texts()


def test_the_fleet_shows_the_visible_servers_failing_first_with_sparklines(console_page, fleet):
    page = console_page
    page.goto("/fleet/")
    expect(page.get_by_role("heading", name="Fleet")).to_be_visible()
    assert rows(page) == ["db-broken", "db-main"]  # failing first; globex's server is not visible

    broken = page.locator(f"tr[data-server='{fleet['db-broken'].pk}']")
    expect(broken.locator(".badge").first).to_have_text("failing")
    # The error comes from a monitored server: a member reads the console's sentence for its class, never its
    # words (console staff do, escaped: tests/console/views/test_fleet.py); nothing of it runs.
    expect(broken.locator(".fleet-error")).to_contain_text("connection The collection failed.")
    expect(broken.locator(".fleet-error")).not_to_contain_text("could not connect")
    assert page.evaluate("window.pwned === undefined")

    main = page.locator(f"tr[data-server='{fleet['db-main'].pk}']")
    expect(main.locator(".badge").first).to_have_text("ok")
    expect(main.locator("td.plan")).to_have_text("not tracked")  # never "0" where planning was off
    calls = float(main.locator("td.calls").inner_text().replace(",", ""))
    assert calls > 0
    drawn = assert_charts_drawn(page, at_least=2)
    assert set(drawn) == {f"spark-{fleet['db-broken'].pk}", f"spark-{fleet['db-main'].pk}"}
    expect(main.locator("a.advice-count")).to_have_text("1 critical · 3 warning")
    # At 1440 px, with a long error in a row, the whole table fits: its last column (the sparklines) is on
    # screen, not cut off behind a horizontal scroll.
    fit = page.evaluate(
        """() => { const wrap = document.querySelector('.table-scroll'), last = document.querySelector(
             'table.fleet-table tbody tr[data-server] td:last-child');
           return {scroll: wrap.scrollWidth, client: wrap.clientWidth, right: last.getBoundingClientRect().right,
                   viewport: window.innerWidth}; }"""
    )
    assert fit["viewport"] == 1440 and fit["scroll"] <= fit["client"] and fit["right"] <= fit["viewport"], fit


def test_filters_and_sorting_keep_their_state_in_the_url_and_back_works(console_page, fleet, live_server):
    page = console_page
    page.goto("/fleet/")
    expect(page.locator("tr[data-server]")).to_have_count(2)

    page.get_by_label("Status").select_option("ok")  # submits by itself (data-autosubmit), through htmx
    expect(page).to_have_url(re.compile(r"[?&]status=ok(&|$)"))
    expect(page.locator("tr[data-server]")).to_have_count(1)
    assert rows(page) == ["db-main"]
    assert_charts_drawn(page)  # the swapped-in sparkline is drawn too

    page.get_by_role("link", name="Calls/s", exact=True).click()
    expect(page).to_have_url(re.compile(r"sort=calls"))
    expect(page).to_have_url(re.compile(r"status=ok"))
    expect(page.locator("th a.sorted")).to_contain_text("Calls/s")

    page.go_back()
    expect(page).to_have_url(re.compile(r"status=ok"))
    expect(page).not_to_have_url(re.compile(r"sort="))
    expect(page.locator("th a.sorted")).not_to_contain_text("Calls/s")
    page.go_back()
    expect(page).to_have_url(f"{live_server.url}/fleet/")
    expect(page.locator("tr[data-server]")).to_have_count(2)
    expect(page.get_by_label("Status")).to_have_value("")
    assert_charts_drawn(page, at_least=2)


def test_a_range_change_and_a_text_filter_without_reload(console_page, fleet):
    page = console_page
    page.goto("/fleet/")
    page.evaluate("window.sameDocument = true")  # gone if the browser loaded a new document
    page.get_by_role("link", name="6h", exact=True).click()
    expect(page).to_have_url(re.compile(r"range=6h"))
    expect(page.locator(".ranges a.active")).to_have_text("6h")
    assert_charts_drawn(page, at_least=2)

    page.get_by_label("Server name contains").fill("main")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"q=main"))
    expect(page).to_have_url(re.compile(r"range=6h"))
    assert rows(page) == ["db-main"]
    assert page.evaluate("window.sameDocument === true")


def test_a_server_opens_from_its_row(console_page, fleet, live_server):
    page = console_page
    page.goto("/fleet/?range=6h")
    page.get_by_role("link", name="db-main", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/servers/{fleet['db-main'].pk}/\?range=6h$"))
    expect(page.get_by_role("heading", name="db-main")).to_be_visible()
    assert_charts_drawn(page, at_least=6)


SPARKS = """() => [...document.querySelectorAll('canvas[data-chart^="spark-"]')].map(c => ({
    id: c.dataset.chart, drawn: Number(c.dataset.drawn),
    spec: JSON.parse(document.getElementById(c.dataset.chart).textContent)}))"""


@pytest.mark.parametrize(("rng", "hours"), [("24h", 24), ("7d", 168), ("30d", 720)])
def test_each_sparkline_shows_the_range_in_enough_points_with_gaps_as_breaks(console_page, fleet, rng, hours):
    """A sparkline (~140 px) draws one point an hour up to 3 days, hours averaged down to at most 72 points
    beyond; hours before the server's history (26 hours here) are null, a gap, never 0."""
    page = console_page
    page.goto(f"/fleet/?range={rng}")
    assert_charts_drawn(page, at_least=2)
    for spark in page.evaluate(SPARKS):
        x, data = spark["spec"]["x"], spark["spec"]["series"][0]["data"]
        group = -(-(hours + 1) // 72)  # the range's hours (and the one it starts in) per point
        assert len(x) in (-(-hours // group), -(-(hours + 1) // group)), (rng, len(x))
        assert spark["drawn"] == sum(v is not None for v in data) >= 1
        assert all(b - a == group * 3_600_000 for a, b in zip(x, x[1:], strict=False)), rng
        # Values only where the history is (the last 26 hours): before it, gaps.
        with_data = [t for t, v in zip(x, data, strict=True) if v is not None]
        assert x[-1] - with_data[0] <= (27 + group) * 3_600_000, rng
        assert rng == "24h" or data[0] is None
