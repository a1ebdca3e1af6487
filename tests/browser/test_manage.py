"""Server management in a real browser: adding a server after "test connection" (queued for a real worker
and polled by the page; the check runs against a real monitored PostgreSQL, and against a closed port), the
password never shown again, the network policy's refusal and the check rate limit on the page, disabling and
removing with the confirmation, and a viewer kept read-only."""

from __future__ import annotations

import re
import socket

from playwright.sync_api import Page, expect

from inventory.models import Membership, Organization, Server
from tests.conftest import APP_DB, MONITOR_PASSWORD, MONITOR_USER

TYPED_PASSWORD = MONITOR_PASSWORD


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fill_connection(page: Page, *, name: str, port: int) -> None:
    """A connection to 127.0.0.1:`port`, database app, as the clusters' monitoring role with its password (sent
    through SCRAM, as a new server requires)."""
    page.get_by_label("Name").fill(name)
    page.get_by_label("Host").fill("127.0.0.1")
    page.get_by_label("Port").fill(str(port))
    page.get_by_label("Database").fill(APP_DB)
    page.get_by_label("Role", exact=True).fill(MONITOR_USER)  # not "Trusted roles (plans)"
    page.get_by_label("Password", exact=True).fill(TYPED_PASSWORD)


def test_a_server_is_added_after_testing_its_connection(console_page, live_server, check_worker, pg_clusters):
    page = console_page
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if "/manage/servers/checks/" in r.url else None)
    page.goto("/manage/servers/")
    expect(page.locator(".role-sql pre.sql")).to_contain_text("CREATE ROLE")
    page.get_by_role("link", name="Add a server").click()
    expect(page.get_by_role("heading", name="Add a server")).to_be_visible()
    page.evaluate("window.sameDocument = true")  # gone if the browser loaded a new document

    fill_connection(page, name="db-nowhere", port=closed_port())
    page.get_by_role("button", name="Test connection").click()
    result = page.locator("#check-result")
    expect(result.locator(".check-summary")).to_contain_text("cannot connect")

    # A real PostgreSQL: the check connects and reads its version and settings. (Not the console's own history
    # store: the network policy refuses it.)
    page.get_by_label("Port").fill(str(pg_clusters[17].port))
    page.get_by_role("button", name="Test connection").click()
    expect(result.locator(".check-summary")).not_to_contain_text("cannot connect")
    expect(result.locator(".check-facts")).to_contain_text(re.compile(r"PostgreSQL\s*\d+"))
    expect(result.locator(".check-facts")).to_contain_text("pg_stat_statements.max")
    assert polls, "the page never polled the queued check"  # the check ran on the worker, not in the request
    assert page.evaluate("window.sameDocument === true")  # only the report was swapped in ...
    expect(page.get_by_label("Password", exact=True)).to_have_value(TYPED_PASSWORD)  # ... the typed password stays

    page.get_by_label("Tags").fill("prod, eu-west")
    page.get_by_label("Trusted roles (plans)").fill("app_owner, my role")
    page.get_by_role("button", name="Add server").click()
    expect(page).to_have_url(f"{live_server.url}/manage/servers/")
    expect(page.locator(".messages")).to_contain_text("db-nowhere was added")
    row = page.locator("table.manage-table tr", has_text="db-nowhere")
    expect(row).to_contain_text("eu-west")
    server = Server.objects.get(name="db-nowhere")
    assert server.organization.name == "acme" and server.get_password() == TYPED_PASSWORD
    assert (server.plans_trusted_roles, server.plans_trusted_schemas) == (["app_owner", "my role"], [])
    # Write-only: the password is in no page.
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("Password", exact=True)).to_have_value("")
    assert TYPED_PASSWORD not in page.content()


def test_disabling_and_removing_a_server_asks_first(console_page):
    acme = Organization.objects.get(name="acme")
    Server.objects.create(organization=acme, name="db-old", host="127.0.0.1", port=5432, user="monitor")
    page = console_page
    page.goto("/manage/servers/")
    row = page.locator("table.manage-table tr", has_text="db-old")
    row.get_by_role("button", name="Disable").click()
    expect(page.locator(".messages")).to_contain_text("db-old is disabled")
    expect(row.get_by_role("button", name="Enable")).to_be_visible()
    assert not Server.objects.get(name="db-old").enabled

    dialogs: list[str] = []

    def answer(dialog, accept: bool) -> None:
        dialogs.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, accept=False))
    row.get_by_role("button", name="Remove").click()
    expect(row).to_be_visible()
    assert Server.objects.filter(name="db-old").exists()
    page.once("dialog", lambda d: answer(d, accept=True))
    row.get_by_role("button", name="Remove").click()
    expect(page.locator(".messages")).to_contain_text("db-old was removed")
    expect(page.locator("table.manage-table tr", has_text="db-old")).to_have_count(0)
    assert dialogs == ["Remove db-old and its whole history? This cannot be undone."] * 2
    assert not Server.objects.filter(name="db-old").exists()


def test_a_viewer_sees_the_servers_read_only(member, logged_in, console_log):
    viewer = member(role=Membership.Role.VIEWER, org="acme", username="viewer")
    Server.objects.create(organization=Organization.objects.get(name="acme"), name="db-main", host="h", user="m")
    page = logged_in(viewer)
    page.goto("/manage/servers/")
    expect(page.locator("table.manage-table tr", has_text="db-main")).to_contain_text("read-only")
    expect(page.get_by_role("link", name="Add a server")).to_have_count(0)
    expect(page.get_by_role("button", name="Remove")).to_have_count(0)
    console_log.allow(r"status of 403 \(Forbidden\) \(.*/manage/servers/add/\)$")
    assert page.goto("/manage/servers/add/").status == 403
    expect(page.get_by_role("navigation").get_by_role("link", name="Fleet")).to_be_visible()


def test_a_refused_address_and_too_many_checks_are_said_on_the_page(console_page, check_worker, settings, tmp_path):
    """The network policy's refusal and the check rate limit reach the page's report (htmx swaps in only a
    successful answer: a 429 there would leave the last report standing)."""
    settings.PAGE_RATES = {**settings.PAGE_RATES, "check": "2/min"}
    page = console_page
    page.goto("/manage/servers/add/")
    fill_connection(page, name="meta", port=80)
    page.get_by_label("Host").fill("169.254.169.254")
    page.get_by_role("button", name="Test connection").click()
    summary = page.locator("#check-result .check-summary")
    expect(summary).to_contain_text("cannot connect: policy")
    expect(page.locator("#check-result")).to_contain_text("169.254.169.254 is a link-local or cloud metadata address")
    page.locator("#check-result").screenshot(path=str(tmp_path / "check-policy.png"))
    page.get_by_label("Host").fill("127.0.0.1")
    page.get_by_label("Port").fill(str(closed_port()))
    page.get_by_role("button", name="Test connection").click()
    expect(summary).to_contain_text("cannot connect: refused")
    page.get_by_role("button", name="Test connection").click()
    expect(page.get_by_role("alert")).to_contain_text(
        re.compile(r"Too many connection checks in a minute: try again in \d+ s\.")
    )
    page.locator("#check-result").screenshot(path=str(tmp_path / "check-limited.png"))
