"""The unsubscribe link of a weekly mail: it works without a login (the page with its button, and the mail
client's one-click POST of RFC 8058, without a CSRF token), a changed link is refused, and an address that
unsubscribed is not sent the next week's report."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.test import Client

from reports.models import ReportOptIn, Unsubscribed
from reports.selectors import report_recipients
from reports.services import report_opt_in_set, report_send_weekly
from reports.unsubscribe import read_token, unsubscribe_token
from tests.reports.weekly_world import week_after

pytestmark = pytest.mark.django_db


def _link(smtp, address: str) -> str:
    """The path of the unsubscribe link in the last mail `address` received."""
    message = smtp.inbox.to(address)[-1]
    return urlsplit(message["List-Unsubscribe"].strip()[1:-1]).path


@pytest.fixture
def anonymous() -> Client:
    return Client(enforce_csrf_checks=True)  # as a mail client or a browser without a session would


def test_one_click_post_unsubscribes_without_login_and_the_next_week_skips_the_address(
    known_history, readers, smtp, anonymous
):
    org, week = known_history.organization, known_history.week
    report_send_weekly(organization_id=org.pk, week=week)
    link = _link(smtp, readers.client)
    response = anonymous.post(link, data="List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 200
    assert Unsubscribed.objects.filter(organization=org, address=readers.client).exists()
    assert (
        anonymous.post(
            link, data="List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"
        ).status_code
        == 200
    )
    assert Unsubscribed.objects.filter(organization=org).count() == 1

    before = smtp.inbox.count()
    result = report_send_weekly(organization_id=org.pk, week=week_after(week, 1))
    assert (result.claimed, result.sent) == (True, 2)
    assert smtp.inbox.count() == before + 2
    assert smtp.inbox.count(readers.client) == 1  # the first week's only
    assert readers.client not in report_recipients(organization_id=org.pk)


def test_the_page_asks_then_its_button_unsubscribes(known_history, readers, smtp, anonymous):
    org = known_history.organization
    report_send_weekly(organization_id=org.pk, week=known_history.week)
    link = _link(smtp, "alice@acme.example")
    page = anonymous.get(link)
    assert page.status_code == 200
    body = page.content.decode()
    assert "alice@acme.example" in body and "rep-acme" in body and '<form method="post">' in body
    assert not Unsubscribed.objects.exists()  # a GET (a link scanner, a preview) changes nothing
    done = anonymous.post(link)
    assert done.status_code == 200 and "will no longer receive" in done.content.decode()
    assert Unsubscribed.objects.filter(organization=org, address="alice@acme.example").exists()
    # A member who unsubscribed with the link is opted out; opting in again in the console undoes both.
    assert not ReportOptIn.objects.filter(organization=org, user=readers.alice).exists()
    report_opt_in_set(organization_id=org.pk, user=readers.alice, opted_in=True)
    assert not Unsubscribed.objects.exists() and "alice@acme.example" in report_recipients(organization_id=org.pk)


@pytest.mark.parametrize("change", ["payload", "signature", "garbage"])
def test_a_changed_link_is_refused(known_history, readers, anonymous, change):
    org = known_history.organization
    token = unsubscribe_token(organization_id=org.pk, address=readers.client)
    payload, stamp, signature = token.split(":")
    other = unsubscribe_token(organization_id=org.pk, address="someone@else.example").split(":")[0]
    bad = {
        "payload": f"{other}:{stamp}:{signature}",
        "signature": f"{payload}:{stamp}:{signature[:-2]}xx",
        "garbage": "not-a-token",
    }[change]
    assert read_token(bad) is None
    for method in (anonymous.get, anonymous.post):
        response = method(f"/reports/unsubscribe/{bad}/")
        assert response.status_code == 400
        assert "not valid" in response.content.decode()
    assert not Unsubscribed.objects.exists()


def test_a_link_for_another_salt_or_organization_does_not_work(known_history, readers, anonymous):
    from django.core import signing

    forged = signing.dumps([known_history.organization.pk, readers.client])  # the default salt
    assert anonymous.post(f"/reports/unsubscribe/{forged}/").status_code == 400
    gone = unsubscribe_token(organization_id=999_999, address=readers.client)
    assert anonymous.post(f"/reports/unsubscribe/{gone}/").status_code == 400
    assert anonymous.put(f"/reports/unsubscribe/{gone}/").status_code == 405
    assert not Unsubscribed.objects.exists()
