"""The weekly report's page in the console (console/views/reports.py): who sees and changes what, the settings
form's validation, the member's opt-in, "send me a test now" (received by the SMTP server, recorded as a
test, the week left unclaimed), the preview (the mail itself, under its own CSP), the history and the
recipients that keep failing."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.urls import reverse

from inventory.models import Membership
from reports.models import ReportDelivery, ReportOptIn, ReportSchedule, WeeklySend
from reports.services import report_send_weekly
from reports.weekly import console_url
from tests.reports.weekly_world import week_after

pytestmark = pytest.mark.django_db


@pytest.fixture
def stranger(known_history) -> User:
    """A DBA of the other organization."""
    user = User.objects.create_user("wk-stranger", email="stranger@other.example")
    Membership.objects.create(user=user, organization=known_history.other.organization, role=Membership.Role.DBA)
    return user


def page(client, user, org, status: int = 200, **params) -> str:
    client.force_login(user)
    response = client.get(reverse("organization-reports", args=[org.pk]), params)
    assert response.status_code == status
    return response.content.decode()


def test_members_see_the_page_managers_change_it_others_get_404(client, known_history, readers, stranger):
    org = known_history.organization
    viewer = page(client, readers.alice, org)
    assert "Send me a test now" in viewer and "Save settings" not in viewer and "cto@client.example" not in viewer
    assert "every Monday 07:00 UTC" in viewer
    dba = page(client, readers.bob, org)
    assert "Save settings" in dba and "cto@client.example" in dba
    page(client, stranger, org, status=404)
    client.force_login(readers.alice)
    schedule_url = reverse("organization-reports-schedule", args=[org.pk])
    assert client.post(schedule_url, {"weekday": 1, "hour": 8, "time_zone": "UTC"}).status_code == 403
    client.force_login(stranger)
    for name in ("organization-reports-schedule", "organization-reports-opt-in", "organization-reports-test"):
        assert client.post(reverse(name, args=[org.pk])).status_code == 404
    assert client.get(reverse("organization-reports-preview", args=[org.pk])).status_code == 404
    client.logout()
    assert client.get(reverse("organization-reports", args=[org.pk])).status_code == 302  # to the login page
    # The organization's page links here.
    client.force_login(readers.alice)
    assert (
        reverse("organization-reports", args=[org.pk])
        in client.get(reverse("organization", args=[org.pk])).content.decode()
    )


def test_the_settings_form_is_validated_then_saved(client, known_history, readers):
    org = known_history.organization
    client.force_login(readers.carol)
    url = reverse("organization-reports-schedule", args=[org.pk])
    bad = client.post(
        url,
        {
            "enabled": "on",
            "weekday": 9,
            "hour": 24,
            "time_zone": "Mars/Olympus",
            "extra_recipients": "ok@client.example\nnot an address\nalso@bad",
        },
    )
    assert bad.status_code == 400
    html = bad.content.decode()
    for error in (
        "Select a valid choice. 9 is not one of the available choices.",
        "Select a valid choice. 24 is not one of the available choices.",
        "&#x27;Mars/Olympus&#x27; is not a time zone",
        "not an email address: not an address, also@bad",
    ):
        assert error in html, error
    assert ReportSchedule.objects.get(organization=org).extra_recipients == ["cto@client.example"]  # unchanged
    extra = "CTO@Client.example, ops@client.example\n\nops@client.example"
    good = client.post(url, {"weekday": 4, "hour": 17, "time_zone": "Europe/Paris", "extra_recipients": extra})
    assert good.status_code == 302
    schedule = ReportSchedule.objects.get(organization=org)
    assert (schedule.enabled, schedule.weekday, schedule.hour, schedule.time_zone) == (False, 4, 17, "Europe/Paris")
    assert schedule.extra_recipients == ["cto@client.example", "ops@client.example"]
    assert "not sent" in page(client, readers.carol, org)


def test_a_member_opts_in_and_out(client, known_history, readers):
    org = known_history.organization
    client.force_login(readers.carol)
    url = reverse("organization-reports-opt-in", args=[org.pk])
    assert "You do not receive this report" in page(client, readers.carol, org)
    client.post(url, {"opted_in": "1"})
    assert ReportOptIn.objects.filter(organization=org, user=readers.carol).exists()
    assert "You receive this report at <strong>carol@acme.example</strong>" in page(client, readers.carol, org)
    client.post(url, {"opted_in": "0"})
    assert not ReportOptIn.objects.filter(organization=org, user=readers.carol).exists()
    nomail = User.objects.create_user("wk-nomail")
    Membership.objects.create(user=nomail, organization=org, role=Membership.Role.VIEWER)
    client.force_login(nomail)
    response = client.post(url, {"opted_in": "1"})
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert said[-1] == "your account has no email address: set one first"


def test_only_members_and_superusers_receive_the_report(client, known_history, readers, smtp):
    """is_staff (the admin site's login) is no membership: a staff user outside the organization gets its page as a
    404, cannot opt in, and is not mailed its report even with an opt-in row of theirs; a console administrator
    (superuser) may opt in, and is mailed it."""
    org = known_history.organization
    opt_in = reverse("organization-reports-opt-in", args=[org.pk])
    staff = User.objects.create_user("wk-staff", email="staff@console.example", is_staff=True)
    root = User.objects.create_user("wk-root", email="root@console.example", is_staff=True, is_superuser=True)
    page(client, staff, org, status=404)
    assert client.post(opt_in, {"opted_in": "1"}).status_code == 404
    ReportOptIn.objects.create(organization=org, user=staff)  # as one made before the rule (or by hand) would be
    page(client, root, org)
    assert client.post(opt_in, {"opted_in": "1"}).status_code == 302
    assert ReportOptIn.objects.filter(organization=org, user=root).exists()
    sent = report_send_weekly(organization_id=org.pk, week=known_history.week)
    addresses = set(ReportDelivery.objects.filter(send_id=sent.send_id).values_list("address", flat=True))
    assert addresses == {"alice@acme.example", "bob@acme.example", "cto@client.example", "root@console.example"}
    assert smtp.inbox.count("root@console.example") == 1 and smtp.inbox.count("staff@console.example") == 0


def test_send_me_a_test_now(client, known_history, readers, smtp):
    org, week = known_history.organization, known_history.week
    client.force_login(readers.alice)  # a viewer may: it goes to their own address only
    response = client.post(reverse("organization-reports-test", args=[org.pk]), {"week": week.label})
    assert response.status_code == 302
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        f"The report of {week.label} was sent to alice@acme.example."
    ]
    assert smtp.inbox.count() == 1 and smtp.inbox.count("alice@acme.example") == 1
    message = smtp.inbox.to("alice@acme.example")[0]
    assert message["Subject"].startswith("[test] rep-acme weekly report")
    send = WeeklySend.objects.get(organization=org)
    assert (send.kind, send.week, send.requested_by, send.status) == ("test", week.label, readers.alice, "sent")
    # The week is still to be sent, to everybody.
    assert report_send_weekly(organization_id=org.pk, week=week).claimed
    html = page(client, readers.bob, org)
    assert "wk-alice" in html and html.count("alice@acme.example: <strong>sent</strong>") == 2


def test_a_failed_test_send_says_why(client, known_history, readers, smtp):
    smtp.inbox.refuse["alice@acme.example"] = ("550 5.7.1 rejected by policy", None)
    client.force_login(readers.alice)
    response = client.post(reverse("organization-reports-test", args=[known_history.organization.pk]))
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "The test to alice@acme.example failed: 550 5.7.1 rejected by policy"
    ]


def test_the_preview_is_the_mail_under_its_own_csp(client, known_history, readers):
    org, week = known_history.organization, known_history.week
    html = page(client, readers.alice, org, week=week.label)
    preview_url = reverse("organization-reports-preview", args=[org.pk]) + f"?week={week.label}"
    assert f'src="{preview_url}"' in html and "sandbox=" in html
    response = client.get(preview_url)
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    csp = response["Content-Security-Policy"]
    assert "frame-ancestors 'self'" in csp and "img-src data:" in csp and "script" not in csp
    body = response.content.decode()
    assert "cid:" not in body and len(re.findall(r'src="data:image/png;base64,', body)) == 2
    assert "rep-main" in body and "Planning time: not tracked" in body and '<base target="_top">' in body
    assert console_url(reverse("server", args=[known_history.server.pk])) in body  # links leave for the console
    # The page itself keeps the console's strict policy.
    assert (
        "frame-ancestors 'none'"
        in client.get(reverse("organization-reports", args=[org.pk]))["Content-Security-Policy"]
    )
    bad = page(client, readers.alice, org, week="2026-W99")
    assert "has no ISO week 99" in bad


def test_the_recipients_that_keep_failing_are_listed(client, known_history, readers, smtp):
    org = known_history.organization
    smtp.inbox.refuse["cto@client.example"] = ("550 5.1.1 no such user", None)
    for n in range(3):
        report_send_weekly(organization_id=org.pk, week=week_after(known_history.week, n))
    assert ReportDelivery.objects.filter(address="cto@client.example", status="failed").count() == 3
    html = page(client, readers.bob, org)
    failing = html[html.index('id="failing"') : html.index('id="history"')]
    assert "cto@client.example" in failing and "550 5.1.1 no such user" in failing and "alice" not in failing
    assert "partial" in html
    assert "cto@client.example" not in page(client, readers.alice, org)  # a viewer sees no addresses


def test_a_new_installation_is_told_when_its_first_report_goes_out(client, known_history, readers):
    from django.utils import timezone

    from reports.selectors import next_due, report_schedule

    org = known_history.organization
    WeeklySend.objects.filter(organization=org).delete()  # rolled back with the test
    due = next_due(report_schedule(organization_id=org.pk), now=timezone.now())
    html = " ".join(page(client, readers.alice, org).split())
    assert "none sent yet: the first one goes out" in html and "the next one" not in html
    assert due.strftime("%Y") in html and due.strftime("%H:00") in html


def test_test_mails_and_previews_are_limited_per_user(client, known_history, readers, smtp, settings):
    """Each test mail goes out at once and each preview renders a week: a clear refusal past the rate."""
    settings.PAGE_RATES = {**settings.PAGE_RATES, "test_mail": "1/hour", "preview": "1/min"}
    org = known_history.organization
    client.force_login(readers.alice)
    url = reverse("organization-reports-test", args=[org.pk])
    client.post(url)
    refused = client.post(url)
    said = [str(m) for m in get_messages(refused.wsgi_request)]
    assert re.fullmatch(r"Too many test mails in an hour: try again in \d+ minutes\.", said[-1]), said
    assert smtp.inbox.count("alice@acme.example") == 1
    preview = reverse("organization-reports-preview", args=[org.pk])
    assert client.get(preview).status_code == 200
    again = client.get(preview)
    assert again.status_code == 429 and int(again["Retry-After"]) > 0
    assert re.fullmatch(r"Too many previews in a minute: try again in \d+ s\.", again.content.decode())
