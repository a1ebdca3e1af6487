"""A new installation opens on its first minutes, not on a day of nothing: with four minutes of history the fleet,
the server, the planning and the statement pages open on 1 h (the newest minutes fill the chart), a range chosen
longer says where the history begins, and a history older than six hours opens on 24 h as before."""

from __future__ import annotations

from playwright.sync_api import expect

from history.models import Statement

RANGE = "[aria-label='Time range'] a.active"


def test_a_new_installation_opens_on_the_range_its_history_covers(console_page, synthetic_server):
    page = console_page
    new = synthetic_server("db-new", hours=0.07, step_min=1, n=5)
    statement = Statement.objects.filter(server=new).order_by("pk").first()
    for path in ("/fleet/", f"/servers/{new.pk}/", f"/servers/{new.pk}/planning/", f"/statements/{statement.pk}/"):
        page.goto(path)
        expect(page.locator(RANGE).first).to_have_text("1h")
    page.goto(f"/servers/{new.pk}/")
    expect(page.locator(".history-begins")).to_contain_text("The history begins")  # within the hour, said
    page.goto(f"/servers/{new.pk}/?range=24h")
    expect(page.locator(RANGE).first).to_have_text("24h")  # a choice in the URL is kept
    expect(page.locator(".history-begins")).to_contain_text("The history begins")
    page.screenshot(path="/tmp/shots/opening-24h.png")


def test_a_history_older_than_six_hours_opens_on_a_day(console_page, synthetic_server):
    page = console_page
    old = synthetic_server("db-old", n=5)  # 26 hours
    for path in ("/fleet/", f"/servers/{old.pk}/"):
        page.goto(path)
        expect(page.locator(RANGE).first).to_have_text("24h")
    expect(page.locator(".history-begins")).to_have_count(0)
