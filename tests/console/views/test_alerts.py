"""The alert pages (console/views/alerts.py) through the Django test client: who sees and does what (viewers
read, DBAs acknowledge, admins add, test and delete channels and change rules; another organization's pages are
a 404), the forms' refusals under their fields, a webhook's signing secret shown once, no channel's secret ever
in a page, and a hostile alert title shown as text."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from alerts.models import Channel, Delivery
from tests.alerts.alerts_world import HOOK, HOSTILE, AlertsWorld, assert_no_secret, build_alerts

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(api_world, settings) -> AlertsWorld:
    return build_alerts(api_world, settings)


def client_of(world: AlertsWorld, role: str) -> Client:
    c = Client()
    c.force_login(world.api.users[role])
    return c


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_every_member_reads_the_three_pages_others_get_404(world):
    acme = world.api.acme
    urls = [reverse(name, args=[acme.pk]) for name in ("alerts", "alert-channels", "alert-rules")]
    for role in ("viewer", "dba", "admin"):
        for url in urls:
            response = client_of(world, role).get(url)
            assert response.status_code == 200, (role, url)
            assert_no_secret(world, response)
    for url in urls:
        assert client_of(world, "outsider").get(url).status_code == 404
        assert Client().get(url).status_code == 302  # to the login page
    # The organization's page links to them.
    assert urls[0] in client_of(world, "viewer").get(reverse("organization", args=[acme.pk])).content.decode()


def test_the_alerts_page_shows_what_is_going_on_first_and_escapes_titles(world):
    html = client_of(world, "viewer").get(reverse("alerts", args=[world.api.acme.pk])).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    active, history = html.index('id="active"'), html.index('id="history"')
    assert active < html.index(f'id="alert-{world.open.pk}"') < history < html.index(f'id="alert-{world.resolved.pk}"')
    assert "acknowledged</span> by dba" in html
    assert "/acknowledge/" not in html  # a viewer has no button
    assert "their outage" not in html
    dba = client_of(world, "dba").get(reverse("alerts", args=[world.api.acme.pk])).content.decode()
    assert reverse("alert-acknowledge", args=[world.api.acme.pk, world.open.pk]) in dba
    # the acknowledged one has no button
    assert reverse("alert-acknowledge", args=[world.api.acme.pk, world.acknowledged.pk]) not in dba


def test_a_dba_acknowledges_a_viewer_may_not(world):
    acme = world.api.acme
    url = reverse("alert-acknowledge", args=[acme.pk, world.open.pk])
    assert client_of(world, "viewer").post(url).status_code == 403
    assert client_of(world, "outsider").post(url).status_code == 404
    theirs = reverse("alert-acknowledge", args=[acme.pk, world.theirs.pk])
    assert client_of(world, "dba").post(theirs).status_code == 404
    assert client_of(world, "dba").get(url).status_code == 405
    world.open.refresh_from_db()
    assert world.open.acknowledged_at is None
    response = client_of(world, "dba").post(url)
    assert response.status_code == 302 and response["Location"] == reverse("alerts", args=[acme.pk])
    assert "is acknowledged" in said(response)[0] and HOSTILE[:20] in said(response)[0]
    world.open.refresh_from_db()
    assert world.open.acknowledged_by == world.api.users["dba"]
    resolved = client_of(world, "admin").post(reverse("alert-acknowledge", args=[acme.pk, world.resolved.pk]))
    assert "this alert is resolved already" in said(resolved)[0]
    # The message is escaped like the rest of the page.
    follow = client_of(world, "dba")
    follow.post(reverse("alert-acknowledge", args=[acme.pk, world.open.pk]))
    assert "<script>alert(1)" not in follow.get(reverse("alerts", args=[acme.pk])).content.decode()


def test_the_channels_page_shows_failing_state_and_recent_deliveries(world):
    slack = world.channels["slack"]
    Channel.objects.filter(pk=slack.pk).update(consecutive_failures=2, last_error="answered HTTP 500")
    Delivery.objects.create(channel=slack, event="test", title="<b>bold</b> test", status="failed", last_error="boom")
    html = client_of(world, "viewer").get(reverse("alert-channels", args=[world.api.acme.pk])).content.decode()
    section = html.split(f'id="channel-{slack.pk}"')[1].split("</section>")[0]
    assert "failing" in section and "the last 2 deliveries failed: answered HTTP 500" in section
    assert "&lt;b&gt;bold&lt;/b&gt; test" in section and "<b>bold</b>" not in html
    assert "127.0.0.1" in html and "PagerDuty (Events API v2)" in html
    assert "oncall@acme.example" not in html and "1 address" in html  # a viewer: how many, not who
    assert "New Webhook channel" not in html and "Send a test" not in html
    admin = client_of(world, "admin").get(reverse("alert-channels", args=[world.api.acme.pk])).content.decode()
    assert "oncall@acme.example" in admin and "New Webhook channel" in admin and "Send a test" in admin
    assert admin.count('name="kind"') == 4


def test_an_admin_adds_a_webhook_and_sees_its_secret_once(world):
    url = reverse("alert-channels", args=[world.api.acme.pk])
    new = {"kind": "webhook", "webhook-name": "ops", "webhook-target": HOOK}
    for role, status in (("viewer", 403), ("dba", 403), ("outsider", 404)):
        assert client_of(world, role).post(url, new).status_code == status
    assert not Channel.objects.filter(name="ops").exists()
    admin = client_of(world, "admin")
    response = admin.post(url, new)
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    html = response.content.decode()
    channel = Channel.objects.get(organization=world.api.acme, name="ops")
    secret = html.split('id="signing-secret">')[1].split("<")[0]
    assert len(secret) >= 32 and "The webhook ops is added" in html
    assert_no_secret(world, response)  # the URL is never shown back, nor anything encrypted
    again = admin.get(url).content.decode()
    assert secret not in again and 'id="signing-secret"' not in again and f'id="channel-{channel.pk}"' in again


def test_other_kinds_are_added_with_a_message(world):
    url = reverse("alert-channels", args=[world.api.acme.pk])
    response = client_of(world, "admin").post(
        url, {"kind": "email", "email-name": "team", "email-addresses": "a@acme.example\nb@acme.example"}
    )
    assert response.status_code == 302 and "The channel team is added" in said(response)[0]
    assert Channel.objects.get(name="team").addresses == ["a@acme.example", "b@acme.example"]


@pytest.mark.parametrize(
    ("post", "field", "words"),
    [
        ({"kind": "webhook", "webhook-name": "x", "webhook-target": "ftp://x/y"}, "webhook-target", "https://"),
        ({"kind": "pagerduty", "pagerduty-name": "x", "pagerduty-target": "short"}, "pagerduty-target", "32 letters"),
        ({"kind": "email", "email-name": "x", "email-addresses": "nope"}, "email-addresses", "not an email address"),
        ({"kind": "email", "email-name": "", "email-addresses": "a@b.example"}, "email-name", "required"),
        ({"kind": "pagerduty", "pagerduty-name": "hook", "pagerduty-target": "0" * 32}, "pagerduty-name", "already"),
    ],
)
def test_a_refused_channel_is_said_under_its_field(world, post, field, words):
    before = Channel.objects.count()
    response = client_of(world, "admin").post(reverse("alert-channels", args=[world.api.acme.pk]), post)
    assert response.status_code == 400
    html = response.content.decode()
    after_field = html.split(f'id="id_{field}"')[1].split("</div>")[0]
    assert words in after_field.replace("&#x27;", "'"), after_field
    assert "was not added: see the errors below" in html
    assert Channel.objects.count() == before
    assert 'value="ftp://x/y"' not in html and 'value="short"' not in html  # a target is never shown back


def test_a_channel_past_the_organizations_limit_is_refused_with_the_reason(world, settings):
    """acme has four channels (one of each kind): with ALERTS_ORG_MAX_CHANNELS at 4, a fifth is refused above the
    form, saying the limit and what to do."""
    settings.ALERTS_ORG_MAX_CHANNELS = 4
    post = {"kind": "email", "email-name": "fifth", "email-addresses": "a@acme.example"}
    response = client_of(world, "admin").post(reverse("alert-channels", args=[world.api.acme.pk]), post)
    assert response.status_code == 400
    html = response.content.decode().replace("&#x27;", "'")
    form = html.split('id="id_email-name"')[0].rsplit("<form", 1)[1]
    assert "acme has 4 alert channels already, its limit: delete one first" in form, form
    assert "was not added: see the errors below" in html
    assert not Channel.objects.filter(name="fifth").exists()


def test_an_unknown_kind_is_refused(world):
    response = client_of(world, "admin").post(reverse("alert-channels", args=[world.api.acme.pk]), {"kind": "sms"})
    assert response.status_code == 400 and "is not a kind of channel" in response.content.decode()


def test_an_admin_sends_a_test_and_deletes_a_channel(world, monkeypatch, django_capture_on_commit_callbacks):
    queued = []
    monkeypatch.setattr("alerts.tasks.deliver.delay", queued.append)
    acme, hook, pager = world.api.acme, world.channels["webhook"], world.channels["pagerduty"]
    test_url = reverse("alert-channel-test", args=[acme.pk, hook.pk])
    assert client_of(world, "dba").post(test_url).status_code == 403
    assert client_of(world, "outsider").post(test_url).status_code == 404
    their = reverse("alert-channel-test", args=[acme.pk, world.their_channel.pk])
    assert client_of(world, "admin").post(their).status_code == 404
    with django_capture_on_commit_callbacks(execute=True):
        response = client_of(world, "admin").post(test_url)
    (delivery,) = Delivery.objects.filter(channel=hook)
    assert queued == [delivery.pk] and f"delivery #{delivery.pk}" in said(response)[0]
    assert response["Location"].endswith(f"#channel-{hook.pk}")
    page = client_of(world, "viewer").get(reverse("alert-channels", args=[acme.pk])).content.decode()
    assert f'data-delivery="{delivery.pk}"' in page

    delete = reverse("alert-channel-delete", args=[acme.pk, pager.pk])
    assert client_of(world, "dba").post(delete).status_code == 403
    world.rules["dealloc"].channels.set([pager])
    refused = client_of(world, "admin").post(delete)
    assert "Deallocation storm" in said(refused)[0] and Channel.objects.filter(pk=pager.pk).exists()
    world.rules["dealloc"].channels.clear()
    done = client_of(world, "admin").post(delete)
    assert "is deleted" in said(done)[0] and not Channel.objects.filter(pk=pager.pk).exists()


def test_rules_are_read_only_for_members_and_changed_by_admins(world):
    acme, rule = world.api.acme, world.rules["regression"]
    url = reverse("alert-rules", args=[acme.pk])
    viewer = client_of(world, "viewer").get(url).content.decode()
    assert "Times slower" in viewer and "<form" not in viewer.split("<main")[1].replace('action="/logout/"', "")
    admin = client_of(world, "admin").get(url).content.decode()
    assert f'name="rule-{rule.pk}-regression_factor"' in admin and f'name="rule-{rule.pk}-down_minutes"' not in admin
    update = reverse("alert-rule-update", args=[acme.pk, rule.pk])
    good = {
        f"rule-{rule.pk}-enabled": "on",
        f"rule-{rule.pk}-hold_minutes": "20",
        f"rule-{rule.pk}-remind_minutes": "0",
        f"rule-{rule.pk}-regression_factor": "3",
        f"rule-{rule.pk}-regression_min_share": "0.1",
        f"rule-{rule.pk}-regression_days": "14",
        f"rule-{rule.pk}-channels": [str(world.channels["email"].pk)],
    }
    assert client_of(world, "dba").post(update, good).status_code == 403
    assert client_of(world, "outsider").post(update, good).status_code == 404
    their = reverse("alert-rule-update", args=[acme.pk, world.their_rule.pk])
    assert client_of(world, "admin").post(their, good).status_code == 404
    response = client_of(world, "admin").post(update, good)
    assert response.status_code == 302 and response["Location"].endswith(f"#rule-{rule.pk}")
    rule.refresh_from_db()
    assert (rule.hold_minutes, rule.regression_factor, rule.regression_days) == (20, 3.0, 14)
    assert list(rule.channels.all()) == [world.channels["email"]]


def test_a_refused_rule_change_says_why_under_each_field(world):
    acme, rule = world.api.acme, world.rules["regression"]
    p = f"rule-{rule.pk}"
    bad = {
        f"{p}-hold_minutes": "-5",
        f"{p}-remind_minutes": "abc",
        f"{p}-regression_factor": "0.5",
        f"{p}-regression_min_share": "2",
        f"{p}-regression_days": "40",
        f"{p}-channels": [str(world.their_channel.pk)],
    }
    response = client_of(world, "admin").post(reverse("alert-rule-update", args=[acme.pk, rule.pk]), bad)
    assert response.status_code == 400
    html = response.content.decode()
    assert f"The rule {rule.name} was not saved" in html
    section = html.split(f'id="rule-{rule.pk}"')[1].split("</section>")[0]
    assert "Enter a whole number" in section.split(f'id="id_{p}-remind_minutes"')[1].split("</div>")[0]
    assert "Select a valid choice" in section.split("<legend>Channels</legend>")[1].split("</fieldset>")[0]
    # The form is refused before the rule is asked: the ranges come from the rule itself on a second try.
    bad[f"{p}-remind_minutes"], bad[f"{p}-channels"] = "0", []
    html = client_of(world, "admin").post(reverse("alert-rule-update", args=[acme.pk, rule.pk]), bad).content.decode()
    for field, words in (
        ("hold_minutes", "minutes: 0 or more"),
        ("regression_factor", "more than 1"),
        ("regression_min_share", "from 0 to 1"),
        ("regression_days", "from 1 to 28"),
    ):
        assert words in html.split(f'id="id_{p}-{field}"')[1].split("</div>")[0], field
    before = rule.regression_factor
    rule.refresh_from_db()
    assert rule.regression_factor == before and rule.hold_minutes == 15


def test_test_alerts_are_limited_per_user(world, settings, monkeypatch):
    monkeypatch.setattr("alerts.tasks.deliver.delay", lambda pk: None)
    settings.PAGE_RATES = {**settings.PAGE_RATES, "test_alert": "1/hour"}
    hook = world.channels["webhook"]
    test_url = reverse("alert-channel-test", args=[world.api.acme.pk, hook.pk])
    admin = client_of(world, "admin")
    admin.post(test_url)
    refused = admin.post(test_url)
    assert said(refused)[-1].startswith("Too many test alerts in an hour: try again in")
    assert Delivery.objects.filter(channel=hook).count() == 1  # the second never went out
