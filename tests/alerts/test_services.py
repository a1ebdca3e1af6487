"""Sending through a channel, against real receivers on loopback: the generic webhook's signed, versioned body,
Slack's blocks, PagerDuty's event with its dedup key, mail as text and HTML at a real SMTP server; a receiver
that fails then succeeds (retried), one that hangs (timeout, retried), one the policy refuses (failed, never
dialled); a delivery claimed once however often it is asked for; one channel's failures never touch another; a
delivery over its organization's share deferred and said, never spent; an organization's number of channels. An
alert's opening and resolution at PagerDuty (one dedup key) and by mail; the default rules, a rule's changes
checked, an acknowledgement."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.utils import timezone

from advisor.models import OrganizationThresholds
from alerts import signing
from alerts.lifecycle import evaluate_organization
from alerts.models import Alert, Channel, Delivery, Rule
from alerts.services import (
    alert_acknowledge,
    channel_create,
    channel_send_test,
    deliveries_fail_exhausted,
    deliveries_lost,
    delivery_attempt,
    rule_update,
    rules_default,
)
from inventory.models import Organization, Server
from tests.alerts.receiver import receiver
from tests.alerts.test_shares import Holder
from tests.reports.weekly_world import running_smtp

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "0123456789abcdef0123456789ABCDEF"


@pytest.fixture
def org():
    return Organization.objects.create(name="alerting")


def _test_delivery(channel: Channel) -> Delivery:
    sent = []
    delivery = channel_send_test(channel=channel, enqueue=sent.append)
    assert sent == [delivery.pk]  # handed to the worker once the row is committed
    return delivery


def test_a_webhook_gets_a_signed_versioned_body(org):
    with receiver(200) as r:
        made = channel_create(organization=org, name="hook", kind="webhook", target=r.url)
        delivery = _test_delivery(made.channel)
        assert delivery_attempt(delivery_id=delivery.pk) == "sent"
        assert delivery_attempt(delivery_id=delivery.pk) == "skipped"  # asked again: sent once
    (req,) = r.requests
    assert signing.verify(made.signing_secret, req.headers, req.body)
    assert not signing.verify(made.signing_secret, req.headers, req.body + b" ")
    assert not signing.verify(made.signing_secret, req.headers, req.body, now=time.time() + 301)  # a replay
    body = json.loads(req.body)
    assert body["schema"] == "pgconsole.alert/1" and body["event"] == "test"
    assert body["alert"]["organization"] == "alerting" and body["alert"]["title"] == "Test of the alert channel hook"
    assert req.headers["X-Pgconsole-Delivery"] == str(delivery.pk)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("sent", 1, 200)
    assert Channel.objects.get(pk=made.channel.pk).last_delivered_at is not None


def test_slack_gets_blocks_and_pagerduty_an_event_with_its_dedup_key(org, settings):
    with receiver(200) as slack, receiver(202) as pd:
        settings.ALERTS_SLACK_URL_PREFIXES = [f"http://127.0.0.1:{slack.port}/"]
        settings.ALERTS_PAGERDUTY_URL = pd.url
        s = channel_create(organization=org, name="slack", kind="slack", target=slack.url).channel
        p = channel_create(organization=org, name="pd", kind="pagerduty", target=KEY).channel
        assert delivery_attempt(delivery_id=_test_delivery(s).pk) == "sent"
        assert delivery_attempt(delivery_id=_test_delivery(p).pk) == "sent"
    blocks = json.loads(slack.requests[0].body)["blocks"]
    assert blocks[0]["type"] == "section" and "Test of the alert channel slack" in blocks[0]["text"]["text"]
    event = json.loads(pd.requests[0].body)
    assert event["routing_key"] == KEY and event["event_action"] == "trigger" and event["dedup_key"]
    assert event["payload"]["severity"] == "info" and event["payload"]["source"] == "alerting"


def test_a_receiver_failing_then_answering_is_retried(org):
    with receiver(500, 200) as r:
        channel = channel_create(organization=org, name="flaky", kind="webhook", target=r.url).channel
        delivery = _test_delivery(channel)
        assert delivery_attempt(delivery_id=delivery.pk) == "retry"
        delivery.refresh_from_db()
        assert (delivery.status, delivery.response_status, delivery.last_error) == ("pending", 500, "answered HTTP 500")
        assert delivery_attempt(delivery_id=delivery.pk) == "sent"
    assert len(r.requests) == 2
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("sent", 2)


def test_a_hanging_receiver_times_out_and_is_retried(org, settings):
    settings.ALERTS_TIMEOUT_S = 1.0
    with receiver("hang", 200) as r:
        channel = channel_create(organization=org, name="slow", kind="webhook", target=r.url).channel
        delivery = _test_delivery(channel)
        started = time.monotonic()
        assert delivery_attempt(delivery_id=delivery.pk) == "retry"
        assert time.monotonic() - started < 5  # the worker's thread is not held past the timeout
        delivery.refresh_from_db()
        assert "within 1 s" in delivery.last_error
        assert delivery_attempt(delivery_id=delivery.pk) == "sent"


def test_a_refused_answer_fails_for_good_and_marks_the_channel_alone(org, settings):
    settings.ALERTS_MAX_ATTEMPTS = 2
    with receiver(404) as bad, receiver(200) as good:
        failing = channel_create(organization=org, name="bad", kind="webhook", target=bad.url).channel
        working = channel_create(organization=org, name="good", kind="webhook", target=good.url).channel
        assert delivery_attempt(delivery_id=_test_delivery(failing).pk) == "failed"  # 404: no retry
        assert delivery_attempt(delivery_id=_test_delivery(working).pk) == "sent"
    failing.refresh_from_db()
    working.refresh_from_db()
    assert (failing.consecutive_failures, failing.last_error) == (1, "answered HTTP 404")
    assert (working.consecutive_failures, working.last_error) == (0, "")


def test_an_address_refused_by_the_policy_at_send_time_is_never_dialled(org, settings):
    with receiver(200) as r:
        channel = channel_create(organization=org, name="moved", kind="webhook", target=r.url).channel
        settings.MONITOR_ALLOW_LOOPBACK = False  # the policy changed since the channel was saved
        delivery = _test_delivery(channel)
        assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    assert r.requests == []
    delivery.refresh_from_db()
    assert "loopback" in delivery.last_error


def test_a_claim_left_by_a_dead_worker_is_taken_again_but_not_a_live_one(org, settings):
    with receiver(200) as r:
        channel = channel_create(organization=org, name="claimed", kind="webhook", target=r.url).channel
        delivery = _test_delivery(channel)
        now = timezone.now()
        Delivery.objects.filter(pk=delivery.pk).update(status="sending", claimed_at=now, attempts=1)
        assert delivery_attempt(delivery_id=delivery.pk, now=now) == "skipped"  # another worker holds it
        later = now + timezone.timedelta(seconds=settings.ALERTS_CLAIM_STALE_S + 1)
        assert delivery_attempt(delivery_id=delivery.pk, now=later) == "sent"
    assert len(r.requests) == 1


def test_mail_goes_as_text_and_html(org, settings):
    channel = channel_create(organization=org, name="mail", kind="email", addresses=["dba@example.com"]).channel
    with running_smtp(settings) as smtp:
        assert delivery_attempt(delivery_id=_test_delivery(channel).pk) == "sent"
    (message,) = smtp.inbox.to("dba@example.com")
    assert message["Subject"] == "[test] Test of the alert channel mail"
    kinds = [part.get_content_type() for part in message.walk()]
    assert "text/plain" in kinds and "text/html" in kinds


def test_lost_deliveries_are_the_pending_long_past_due_and_the_claims_of_dead_workers(org, settings):
    channel = channel_create(organization=org, name="tidy", kind="email", addresses=["dba@example.com"]).channel
    now = timezone.now()
    stale = now - timezone.timedelta(seconds=settings.ALERTS_CLAIM_STALE_S + 1)

    def made(**fields) -> int:
        return Delivery.objects.create(channel=channel, event="test", title="t", message={}, **fields).pk

    lost = [made(next_attempt_at=stale), made(status="sending", claimed_at=stale)]
    made(next_attempt_at=now)  # its message is on its way
    made(status="pending", next_attempt_at=now + timezone.timedelta(minutes=8))  # waiting for its retry
    made(status="sending", claimed_at=now)  # a worker is sending it
    made(status="sent", next_attempt_at=stale)
    made(status="failed", next_attempt_at=None)
    assert deliveries_lost(now=now) == lost


def test_an_alert_reaches_pagerduty_with_one_dedup_key_and_mail_with_its_words(org, settings):
    now = timezone.now()
    server = Server.objects.create(organization=org, name="db1", host="192.0.2.1", user="monitor")
    Server.objects.filter(pk=server.pk).update(
        consecutive_failures=3, last_attempt_at=now, last_success_at=now - timedelta(minutes=30)
    )
    rule = Rule.objects.create(organization=org, name="down", kind="server_down", hold_minutes=0)
    sent: list[int] = []
    with receiver(202, 202) as pd, running_smtp(settings) as smtp:
        settings.ALERTS_PAGERDUTY_URL = pd.url
        channel_create(organization=org, name="pd", kind="pagerduty", target=KEY)
        channel_create(organization=org, name="mail", kind="email", addresses=["dba@example.com"])
        evaluate_organization(organization=org, enqueue=sent.append, now=now)
        Server.objects.filter(pk=server.pk).update(consecutive_failures=0, last_success_at=now + timedelta(minutes=1))
        evaluate_organization(organization=org, enqueue=sent.append, now=now + timedelta(minutes=2))
        assert [delivery_attempt(delivery_id=pk) for pk in sent] == ["sent"] * 4
    trigger, resolve = (json.loads(req.body) for req in pd.requests)
    assert trigger["dedup_key"] == resolve["dedup_key"] == f"pgconsole-{rule.pk}-server:{server.pk}"
    assert (trigger["event_action"], resolve["event_action"]) == ("trigger", "resolve")
    assert trigger["payload"]["summary"].startswith("db1: collection failing (error): Not collected for 30 min")
    assert trigger["payload"]["severity"] == "critical" and trigger["payload"]["source"] == "db1"
    subjects = [m["Subject"] for m in smtp.inbox.to("dba@example.com")]
    assert subjects == ["[critical] db1: collection failing (error)", "[resolved] db1: collection failing (error)"]


def test_the_default_rules_are_made_once_with_the_organizations_own_rate(org):
    OrganizationThresholds.objects.create(organization=org, dealloc_critical_per_s=50.0)
    made = rules_default(organization=org)
    again = rules_default(organization=org)
    assert [r.pk for r in made] == [r.pk for r in again] and Rule.objects.filter(organization=org).count() == 4
    assert {r.kind: r.dealloc_per_s for r in made}["dealloc"] == 50.0


def test_a_rule_change_is_checked_and_its_channels_are_the_organizations(org):
    rule = Rule.objects.create(organization=org, name="down", kind="server_down")
    mine = channel_create(organization=org, name="mine", kind="email", addresses=["a@example.com"]).channel
    other = Organization.objects.create(name="elsewhere")
    theirs = channel_create(organization=other, name="theirs", kind="email", addresses=["b@example.com"]).channel
    with pytest.raises(ValidationError) as raised:
        rule_update(rule=rule, values={"remind_minutes": -5, "regression_factor": 0.5})
    assert set(raised.value.message_dict) == {"remind_minutes", "regression_factor"}
    with pytest.raises(ValidationError) as raised:
        rule_update(rule=Rule.objects.get(pk=rule.pk), values={"organization": other})
    assert raised.value.message_dict == {"organization": ["not a setting of a rule"]}
    with pytest.raises(ValidationError) as raised:
        rule_update(rule=Rule.objects.get(pk=rule.pk), values={"tag": "prod"}, channel_ids=[mine.pk, theirs.pk])
    assert raised.value.message_dict == {"channels": ["channels of alerting only"]}
    rule = Rule.objects.get(pk=rule.pk)
    assert (rule.tag, list(rule.channels.all())) == ("", [])  # nothing of a refused change is kept
    rule_update(rule=rule, values={"tag": " prod ", "down_minutes": 30}, channel_ids=[mine.pk])
    rule = Rule.objects.get(pk=rule.pk)
    assert (rule.tag, rule.down_minutes, list(rule.channels.all())) == ("prod", 30, [mine])


def test_the_first_acknowledgement_stays_and_a_resolved_alert_has_none(org):
    rule = Rule.objects.create(organization=org, name="down", kind="server_down")
    server = Server.objects.create(organization=org, name="db1", host="192.0.2.1", user="monitor")
    now = timezone.now()
    values = {"since": now, "first_true_at": now, "last_true_at": now, "severity": "critical", "summary": ""}
    alert = Alert.objects.create(
        rule=rule, server=server, key="server:1", state="open", title="down", path="/", **values
    )
    first, second = User.objects.create_user("first"), User.objects.create_user("second")
    alert_acknowledge(alert=alert, user=first, now=now)
    assert alert_acknowledge(alert=alert, user=second).acknowledged_by == first
    Alert.objects.filter(pk=alert.pk).update(state="resolved")
    alert.refresh_from_db()
    with pytest.raises(ValidationError):
        alert_acknowledge(alert=alert, user=second)


def test_a_dead_workers_claim_on_the_last_attempt_fails_the_delivery_and_is_never_sent_again(org, settings):
    """Before, a claim gone stale was taken again whatever its attempts: a receiver that outlived every worker
    sending to it got a new thread every ALERTS_CLAIM_STALE_S, for ever."""
    with receiver(200) as r:
        channel = channel_create(organization=org, name="exhausted", kind="webhook", target=r.url).channel
        last, tidy = _test_delivery(channel), _test_delivery(channel)
        stale = timezone.now() - timezone.timedelta(seconds=settings.ALERTS_CLAIM_STALE_S + 1)
        Delivery.objects.filter(pk__in=[last.pk, tidy.pk]).update(
            status="sending", claimed_at=stale, attempts=settings.ALERTS_MAX_ATTEMPTS
        )
        assert delivery_attempt(delivery_id=last.pk) == "failed"
        assert deliveries_lost() == []  # past its attempts: never sent again
        assert deliveries_fail_exhausted() == 1  # beat's tidy fails it
        assert delivery_attempt(delivery_id=tidy.pk) == "skipped"
    assert r.requests == []
    for d in (last, tidy):
        d.refresh_from_db()
        assert (d.status, d.attempts, d.last_error) == (
            "failed",
            settings.ALERTS_MAX_ATTEMPTS,
            "the worker sending its last attempt stopped without an answer",
        )
    channel.refresh_from_db()
    assert channel.consecutive_failures == 2


def test_one_channel_is_sent_one_delivery_at_a_time_and_others_go_on(org):
    """While a delivery of a channel is being sent (claimed, not stale), another of the same channel waits a
    second or two (busy) and one of another channel is sent at once."""
    with receiver(200) as r:
        slow = channel_create(organization=org, name="slow", kind="webhook", target=r.url).channel
        other = channel_create(organization=org, name="other", kind="webhook", target=r.url).channel
        sending, waiting, elsewhere = _test_delivery(slow), _test_delivery(slow), _test_delivery(other)
        now = timezone.now()
        Delivery.objects.filter(pk=sending.pk).update(status="sending", claimed_at=now, attempts=1)
        assert delivery_attempt(delivery_id=waiting.pk, now=now) == "busy"
        waiting.refresh_from_db()
        assert waiting.status == "pending" and waiting.attempts == 0
        assert 1 <= (waiting.next_attempt_at - now).total_seconds() <= 3
        assert delivery_attempt(delivery_id=elsewhere.pk, now=now) == "sent"
        Delivery.objects.filter(pk=sending.pk).update(status="sent")
        assert delivery_attempt(delivery_id=waiting.pk, now=now) == "sent"
    assert [int(req.headers["X-Pgconsole-Delivery"]) for req in r.requests] == [elsewhere.pk, waiting.pk]


def test_a_delivery_over_its_organizations_share_is_deferred_and_said_and_spends_no_attempt(org, settings):
    """The organization's one slot (ALERTS_ORG_MAX_SENDING=1) held by another of its deliveries: this one waits a
    few seconds, its record says why, and another organization's delivery goes at once; the slot let go, it is
    sent, the words gone. Each time it waited already, it waits longer, up to ALERTS_TIMEOUT_S."""
    settings.ALERTS_ORG_MAX_SENDING, settings.ALERTS_TIMEOUT_S = 1, 10.0
    other = Organization.objects.create(name="elsewhere")
    with receiver(200) as r:
        mine = channel_create(organization=org, name="mine", kind="webhook", target=r.url).channel
        theirs = channel_create(organization=other, name="theirs", kind="webhook", target=r.url).channel
        waiting, elsewhere = _test_delivery(mine), _test_delivery(theirs)
        now = timezone.now()
        with Holder(org.pk, 1):
            assert delivery_attempt(delivery_id=waiting.pk, now=now) == "deferred"
            waiting.refresh_from_db()
            assert (waiting.status, waiting.attempts) == ("pending", 0)
            assert waiting.last_error == (
                "waiting: 1 other delivery of alerting was being sent, its share of the alert workers "
                "(ALERTS_ORG_MAX_SENDING); sent once one is done"
            )
            assert 1 <= (waiting.next_attempt_at - now).total_seconds() <= 3
            assert delivery_attempt(delivery_id=waiting.pk, now=now, waited=2) == "deferred"
            waiting.refresh_from_db()
            assert 4 <= (waiting.next_attempt_at - now).total_seconds() <= 10  # 1 to 3 s, doubled twice, at most 10
            assert delivery_attempt(delivery_id=waiting.pk, now=now, waited=8) == "deferred"
            waiting.refresh_from_db()
            assert (waiting.next_attempt_at - now).total_seconds() == 10
            assert delivery_attempt(delivery_id=elsewhere.pk, now=now) == "sent"  # its own share
            assert deliveries_lost(now=now) == []  # deferred, not lost
        assert delivery_attempt(delivery_id=waiting.pk, now=now) == "sent"
        assert delivery_attempt(delivery_id=waiting.pk, now=now) == "skipped"  # asked again: sent once
    waiting.refresh_from_db()
    assert (waiting.status, waiting.attempts, waiting.last_error) == ("sent", 1, "")
    assert [int(req.headers["X-Pgconsole-Delivery"]) for req in r.requests] == [elsewhere.pk, waiting.pk]


def test_an_organization_adds_channels_up_to_its_limit(org, settings):
    settings.ALERTS_ORG_MAX_CHANNELS = 2
    first = channel_create(organization=org, name="one", kind="email", addresses=["a@example.com"]).channel
    channel_create(organization=org, name="two", kind="pagerduty", target=KEY)
    with pytest.raises(ValidationError) as refused:
        channel_create(organization=org, name="three", kind="email", addresses=["a@example.com"])
    assert refused.value.message_dict == {
        "__all__": [
            "alerting has 2 alert channels already, its limit: delete one first (a console administrator can raise "
            "it: ALERTS_ORG_MAX_CHANNELS)"
        ]
    }
    assert Channel.objects.filter(organization=org).count() == 2
    other = Organization.objects.create(name="elsewhere")  # a limit of its own
    channel_create(organization=other, name="one", kind="email", addresses=["b@example.com"])
    first.delete()
    channel_create(organization=org, name="three", kind="email", addresses=["a@example.com"])
    settings.ALERTS_ORG_MAX_CHANNELS = 0  # no limit
    channel_create(organization=org, name="four", kind="email", addresses=["a@example.com"])
    assert Channel.objects.filter(organization=org).count() == 3
