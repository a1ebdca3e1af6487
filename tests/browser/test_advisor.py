"""The advisor's pages in a real browser: a server's recommendation with its evidence chart drawn, the
change copied to the clipboard (and the fallback that selects it where the clipboard API is missing),
acknowledging it, and the fleet's count leading to it; hostile text stays text, and the page reports
no console error or CSP violation (the console_log fixture)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from advisor import advice as found
from advisor.models import Recommendation, RecommendationEvent, Status
from advisor.services import recommendations_apply
from inventory.connection import parse_dsn
from inventory.models import Server
from inventory.services import server_create
from tests.browser.conftest import HOSTILE_TEXT, assert_charts_drawn

CHANGE = "ALTER SYSTEM SET pg_stat_statements.max = 10000;"


@pytest.fixture
def advised(transactional_db) -> tuple[Server, Recommendation]:
    """A server of acme with one open critical recommendation whose evidence is a dealloc/s series."""
    server = server_create(
        name="db-advised", connection=parse_dsn("postgresql://m@db-advised.example/app"), organization_name="acme"
    )
    now = timezone.now()
    points = tuple((now - timedelta(minutes=5 * (12 - i)), None if i == 4 else 10.0 + i) for i in range(12))
    rec = found.Advice(
        rule="pgss_max",
        severity="critical",
        server=server.name,
        subject="server",
        title="Raise pg_stat_statements.max",
        explanation=f"Sustained deallocation. {HOSTILE_TEXT}",
        change=found.Change(CHANGE, "restart"),
        effect="Entries stop being evicted.",
        cost="A restart.",
        evidence=(found.EvidenceSeries("dealloc/s", "dealloc/s", points),),
    )
    recommendations_apply(server=server, found_now=[rec], now=now, clear_after=timedelta(hours=2))
    return server, Recommendation.objects.get(server=server)


def test_a_dba_sees_the_evidence_copies_the_change_and_acknowledges(console_page: Page, advised):
    server, rec = advised
    page = console_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(f"/servers/{server.pk}/advisor/")
    card = page.locator(f"[data-recommendation='{rec.pk}']")
    expect(card.get_by_role("heading", name="Raise pg_stat_statements.max")).to_be_visible()
    assert assert_charts_drawn(page, at_least=1) == {f"evidence-{rec.pk}-0": 11}  # one gap among 12 points
    # The explanation is text: its markup is shown, never run.
    expect(card.locator(".advice-explanation")).to_contain_text("<script>window.pwned = 1</script>")
    assert page.evaluate("window.pwned === undefined")

    copy = card.get_by_role("button", name="Copy the change")
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == CHANGE
    expect(copy).to_have_text("Copy", timeout=5_000)  # the feedback goes away

    expect(card.locator("[data-status]")).to_have_text("open")
    card.get_by_role("button", name="Acknowledge").click()
    expect(page).to_have_url(re.compile(rf"/servers/{server.pk}/advisor/$"))
    expect(page.locator(".messages")).to_contain_text("Acknowledged: Raise pg_stat_statements.max (db-advised).")
    card = page.locator(f"article[data-recommendation='{rec.pk}']")
    expect(card.locator("[data-status]")).to_have_text("acknowledged")
    expect(card.locator(".advice-status")).to_contain_text("by dba")
    expect(card.get_by_role("button", name="Acknowledge")).to_have_count(0)
    rec.refresh_from_db()
    assert rec.status == Status.ACKNOWLEDGED and rec.acknowledged_by.username == "dba"
    assert RecommendationEvent.objects.filter(recommendation=rec, kind="acknowledged").count() == 1


def test_without_the_clipboard_api_the_change_is_selected(console_page: Page, advised):
    server, rec = advised
    page = console_page
    page.goto(f"/servers/{server.pk}/advisor/")
    page.evaluate("Object.defineProperty(navigator, 'clipboard', {value: undefined, configurable: true})")
    copy = page.get_by_role("button", name="Copy the change")
    copy.click()
    expect(copy).to_have_text(re.compile(r"^(Copied|Selected: press Ctrl\+C)$"))
    assert page.evaluate("window.getSelection().toString()") == CHANGE


def test_the_fleet_count_leads_to_the_advisor(console_page: Page, advised):
    server, rec = advised
    page = console_page
    page.goto("/fleet/")
    count = page.locator(f"tr[data-server='{server.pk}'] a.advice-count")
    expect(count).to_have_text("1 critical")
    count.click()
    expect(page).to_have_url(re.compile(rf"/servers/{server.pk}/advisor/$"))
    expect(page.get_by_role("heading", name="Advisor · db-advised")).to_be_visible()
    page.get_by_role("navigation").get_by_role("link", name="Advisor", exact=True).click()
    expect(page).to_have_url(re.compile(r"/advisor/$"))
    expect(page.locator(f"[data-recommendation='{rec.pk}'] .advice-server")).to_have_text("db-advised")


def test_the_evidence_is_drawn_as_steps_with_a_break_where_nothing_was_collected(console_page: Page, transactional_db):
    """Evidence stored with each point's end: a value covering an outage is one flat step across it, and where
    no span covers the time (a new baseline after an outage) the line breaks; never a ramp."""
    server = server_create(
        name="db-stepped", connection=parse_dsn("postgresql://m@db-stepped.example/app"), organization_name="acme"
    )
    now = timezone.now().replace(second=0, microsecond=0)
    m = timedelta(minutes=1)
    t0 = now - 60 * m
    spans = [(t0 + i * 5 * m, t0 + (i + 1) * 5 * m) for i in range(4)]  # 4 intervals of 5 minutes
    spans.append((spans[-1][1], spans[-1][1] + 20 * m))  # one snapshot after a 20-minute outage spans it
    spans += [(spans[-1][1] + 10 * m, spans[-1][1] + 15 * m), (spans[-1][1] + 15 * m, spans[-1][1] + 20 * m)]
    values = [40.0, 41.0, 39.0, 40.0, 2.0, 38.0, 40.0]
    series = found.EvidenceSeries.of(
        "dealloc/s", "dealloc/s", [(a, v, b) for (a, b), v in zip(spans, values, strict=True)]
    )
    rec = found.Advice(
        rule="pgss_max",
        severity="critical",
        server=server.name,
        subject="server",
        title="Raise it",
        explanation="Sustained deallocation.",
        change=found.Change(CHANGE, "restart"),
        effect="",
        cost="",
        evidence=(series,),
    )
    recommendations_apply(server=server, found_now=[rec], now=now, clear_after=timedelta(hours=2))
    stored = Recommendation.objects.get(server=server)
    page = console_page
    page.goto(f"/servers/{server.pk}/advisor/")
    chart_id = f"evidence-{stored.pk}-0"
    assert assert_charts_drawn(page, at_least=1) == {chart_id: 7}  # seven values, none of them a gap
    drawn = page.evaluate(
        "id => Chart.getChart(document.querySelector(`canvas[data-chart='${id}']`)).data.datasets[0].data"
        ".map(p => [p.x, p.y])",
        chart_id,
    )
    ms = [(a.timestamp() * 1000, b.timestamp() * 1000) for a, b in spans]
    expected = []
    for i, ((a, b), v) in enumerate(zip(ms, values, strict=True)):
        if i and a > ms[i - 1][1]:
            expected.append([(a + ms[i - 1][1]) / 2, None])  # the 10 minutes nothing covers: a break
        expected += [[a, v], [b, v]]
    assert drawn == expected
    # The value after the outage is flat across all of it (2 dealloc/s over 20 minutes), not a ramp to 40.
    assert [p for p in drawn if p[1] == 2.0] == [[ms[4][0], 2.0], [ms[4][1], 2.0]]
