"""Logging in and out in a real browser, with the Content-Security-Policy in force and nothing blocked."""

from __future__ import annotations

import re

from django.conf import settings
from playwright.sync_api import Page, expect

from console.middleware import CONTENT_SECURITY_POLICY
from tests.browser.conftest import PASSWORD


def log_in(page: Page, username: str, password: str) -> None:
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def test_the_login_page_is_styled_under_the_csp(page, console_log):
    response = page.goto("/")
    assert response.status == 200
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert response.headers["x-frame-options"] == "DENY"
    expect(page).to_have_title("Log in · pgconsole")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    expect(page.get_by_label("User name")).to_be_focused()
    # The stylesheet loaded (same origin, allowed by the CSP) and applies.
    body_font = page.evaluate("getComputedStyle(document.body).fontFamily")
    assert body_font.startswith('"DejaVu Sans"'), body_font
    # The scripts every page carries ran: htmx and Chart.js are defined.
    assert page.evaluate("typeof htmx === 'object' && typeof Chart === 'function'")
    assert console_log.unexpected() == []


def test_a_wrong_password_says_so(page, member):
    member(username="alice")
    page.goto("/")
    log_in(page, "alice", "not-the-password")
    expect(page.get_by_text("Your user name and password did not match")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.get_by_label("User name")).to_have_value("alice")
    expect(page.get_by_role("button", name="Log out")).to_have_count(0)


def test_logging_in_lands_on_the_fleet_and_logging_out_leaves(page, member, live_server):
    member(username="alice")
    page.goto("/")
    log_in(page, "alice", PASSWORD)
    expect(page).to_have_url(f"{live_server.url}/fleet/")
    # Logged in, the login page sends straight back to the fleet.
    page.goto("/")
    expect(page).to_have_url(f"{live_server.url}/fleet/")

    page.goto("/preferences/")
    expect(page.locator("header .user")).to_contain_text("alice · UTC")
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    # The session is gone: a page behind the login asks for it again.
    page.goto("/preferences/")
    expect(page).to_have_url(re.compile(r"/\?next=/preferences/$"))


def test_logging_in_from_a_deep_link_returns_to_it(page, member, live_server):
    member(username="alice")
    page.goto("/preferences/")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    log_in(page, "alice", PASSWORD)
    expect(page).to_have_url(f"{live_server.url}/preferences/")
    expect(page.get_by_role("heading", name="Preferences")).to_be_visible()


def test_the_time_zone_preference_changes_what_pages_show(console_page):
    page = console_page
    page.goto("/preferences/")
    page.get_by_label("Time zone").fill("Europe/Paris")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Times are now shown in Europe/Paris.")).to_be_visible()
    expect(page.locator("header .user")).to_contain_text("dba · Europe/Paris")
    assert page.evaluate("document.body.dataset.timeZone") == "Europe/Paris"


def test_guessing_a_password_is_stopped_with_the_wait_said(page, member, console_log, tmp_path):
    member(username="alice")
    page.goto("/")
    for i in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(page, "alice", f"guess-{i}")
        expect(page.get_by_text("Your user name and password did not match")).to_be_visible()
    log_in(page, "alice", "guess-last")
    console_log.allow(r"429")
    alert = page.get_by_role("alert")
    expect(alert).to_have_text(
        "Too many failed logins for this user name or from this address: try again in 15 minutes."
    )
    expect(page.get_by_text("did not match")).to_have_count(0)
    expect(page.get_by_label("User name")).to_have_value("alice")
    # The right password is refused too while the lock holds.
    log_in(page, "alice", PASSWORD)
    expect(page.get_by_role("alert")).to_be_visible()
    expect(page.get_by_role("button", name="Log out")).to_have_count(0)
    page.screenshot(path=str(tmp_path / "login-locked-out.png"))
