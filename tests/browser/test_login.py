"""Logging in and out in a real browser, with the Content-Security-Policy in force and nothing blocked."""

from __future__ import annotations

import base64
import re
import time

from django.conf import settings
from django_otp.oath import TOTP
from playwright.sync_api import Page, expect

from console.middleware import CONTENT_SECURITY_POLICY
from inventory.models import Membership
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


def test_an_authenticator_app_set_up_and_asked_for_at_the_next_login(page, member, live_server, settings, console_log):
    """The app's key read from the page as a user would type it (the QR code holds the same), a first code turns
    it on; after logging out, the password leads to the code's page, and the code to the page asked for."""
    settings.OTP_TOTP_THROTTLE_FACTOR = 0
    console_log.allow(r"status of 400 \(Bad Request\) \(.*/login/code/\)$")  # the wrong code, answered 400
    member(username="alice", role=Membership.Role.ADMIN)
    page.goto("/preferences/")
    log_in(page, "alice", PASSWORD)
    page.get_by_role("link", name="Two-factor authentication").click()
    expect(page.get_by_text("Recommended for you")).to_be_visible()
    page.get_by_role("button", name="Set up an authenticator app").click()
    expect(page.get_by_role("img", name="QR code of the authenticator key")).to_be_visible()
    assert page.locator(".totp-qr svg").bounding_box()["width"] >= 150  # big enough for a phone to scan
    key = base64.b32decode(page.locator("code.totp-secret").inner_text().replace(" ", ""))
    page.get_by_label("Code from your app").fill(_code(key))
    page.get_by_role("button", name="Turn on").click()
    expect(page.get_by_text("Two-factor authentication is on")).to_be_visible()

    page.get_by_role("button", name="Log out").click()
    page.goto("/preferences/")
    log_in(page, "alice", PASSWORD)
    expect(page.get_by_role("heading", name="Authenticator code")).to_be_visible()
    expect(page.get_by_label("Code")).to_be_focused()
    page.get_by_label("Code").fill("000000")
    page.get_by_role("button", name="Verify").click()
    expect(page.get_by_role("alert")).to_contain_text("That code is not the right one")
    page.get_by_label("Code").fill(_code(key, ahead=1))
    page.get_by_role("button", name="Verify").click()
    expect(page).to_have_url(f"{live_server.url}/preferences/")
    expect(page.get_by_role("heading", name="Preferences")).to_be_visible()


def _code(key: bytes, ahead: int = 0) -> str:
    totp = TOTP(key)
    totp.time = time.time() + ahead * 30
    return f"{totp.token():06d}"
