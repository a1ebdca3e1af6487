"""The alert pages in a real browser: an admin finds them from the organization's page, sees an open alert whose
title is a hostile query text (shown, never run), adds a webhook channel to a real receiver on loopback, copies
its signing secret (shown once), sends a test that the receiver gets signed with that secret, sees the delivery
sent, and acknowledges the alert; no console error, CSP violation or 5xx on the way (the console_log fixture)."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from alerts import signing
from alerts.models import Channel, Delivery
from alerts.services import delivery_attempt, rules_default
from inventory.connection import parse_dsn
from inventory.models import Membership, Organization
from inventory.services import server_create
from tests.alerts import alerts_world
from tests.alerts.receiver import receiver
from tests.browser.conftest import HOSTILE_TEXT


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    """The deliveries the pages hand to the worker; here the test sends them itself (delivery_attempt, the
    worker's one attempt: tests/alerts/test_tasks.py runs a real one)."""
    ids: list[int] = []
    monkeypatch.setattr("alerts.tasks.deliver.delay", ids.append)
    return ids


def test_an_admin_adds_a_webhook_tests_it_and_acknowledges_an_alert(member, logged_in, queued):
    admin = member(role=Membership.Role.ADMIN, org="acme", username="alert-admin")
    page: Page = logged_in(admin)
    org = Organization.objects.get(name="acme")
    server = server_create(
        name="db-alerts", connection=parse_dsn("postgresql://m:pw@127.0.0.1:1/app"), organization_name="acme"
    )
    now = timezone.now()
    alert = alerts_world.alert(
        rules_default(organization=org)[0],
        server,
        at=now,
        key=f"server:{server.pk}",
        title=HOSTILE_TEXT,
        summary="no successful collection for 12 minutes",
    )

    page.goto(f"/organizations/{org.pk}/")
    page.get_by_role("link", name="Alerts", exact=True).click()
    expect(page.get_by_role("heading", name="Alerts")).to_be_visible()
    card = page.locator(f"#alert-{alert.pk}")
    expect(card.locator(".alert-title")).to_have_text(f"db-alerts: {HOSTILE_TEXT}")  # the text, as text
    assert page.evaluate("window.pwned === undefined")

    page.get_by_role("link", name="Channels", exact=True).click()
    expect(page.get_by_role("heading", name="Alert channels")).to_be_visible()
    with receiver(200) as r:
        form = page.locator("#add-webhook")
        form.get_by_label("Name").fill("receiver")
        form.get_by_label("URL").fill(r.url)
        form.get_by_role("button", name="Add the Webhook channel").click()
        expect(page.locator("#new-secret")).to_contain_text("shown this once")
        secret = page.locator("#signing-secret").inner_text().strip()
        channel = Channel.objects.get(organization=org, name="receiver")
        section = page.locator(f"#channel-{channel.pk}")
        expect(section).to_contain_text("127.0.0.1")
        expect(section).not_to_contain_text("/hook")  # a URL shows as its host only

        section.get_by_role("button", name="Send a test to receiver").click()
        expect(page.locator(".messages")).to_contain_text("A test is on its way to receiver")
        expect(page.locator("#signing-secret")).to_have_count(0)  # never shown again
        (delivery_id,) = queued
        assert delivery_attempt(delivery_id=delivery_id) == "sent"
    (request,) = r.requests
    assert signing.verify(secret, request.headers, request.body)  # the secret the page showed signs the requests
    assert json.loads(request.body)["event"] == "test"
    page.reload()
    row = page.locator(f'#channel-{channel.pk} tr[data-delivery="{delivery_id}"]')
    expect(row).to_contain_text("sent")
    expect(row).to_contain_text("HTTP 200")
    expect(page.locator(f"#channel-{channel.pk} h2 .badge.ok")).to_have_text("delivering")
    assert Delivery.objects.get(pk=delivery_id).status == "sent"

    page.get_by_role("link", name="Alerts", exact=True).click()
    card = page.locator(f"#alert-{alert.pk}")
    card.get_by_role("button", name="Acknowledge").click()
    expect(page.locator(".messages")).to_contain_text("is acknowledged")
    expect(page.locator(f"#alert-{alert.pk} .acknowledged")).to_contain_text("acknowledged by alert-admin")
    expect(page.locator(f"#alert-{alert.pk}").get_by_role("button", name="Acknowledge")).to_have_count(0)
    alert.refresh_from_db()
    assert alert.acknowledged_by == admin
    assert page.evaluate("window.pwned === undefined")
