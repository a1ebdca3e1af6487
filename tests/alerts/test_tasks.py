"""Deliveries sent by a real Celery worker and beat (their own processes, on the tests' Redis and the test
database), as production sends them: a receiver answering 500, then 200, retried after the backoff; a worker
SIGKILLed in the middle of a request and a message lost, each delivery sent again by beat's tidy task and answered
once; beat evaluating the rules every second in groups of servers on the rules' worker (queue `alert-rules`),
beside an organization whose evaluation fails, and the alerts worker sending each outage once when it opens and
once when it resolves."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from alerts.models import Delivery, Rule
from alerts.services import channel_create, channel_send_test
from alerts.tasks import deliver
from inventory.models import Organization, Server
from tests.alerts.receiver import receiver
from tests.processes import beat_argv, console_env, processes, succeeded, wait_for, wait_for_more, worker_argv

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_worker_retries_a_failing_receiver_until_it_answers(tmp_path):
    org = Organization.objects.create(name="alerting-worker")
    env = console_env(ALERTS_RETRY_BASE_S="1")
    with receiver(500, 200) as r, processes(tmp_path, env) as procs:
        channel = channel_create(organization=org, name="hook", kind="webhook", target=r.url).channel
        with transaction.atomic():  # as the page does: the task goes once the row is committed
            delivery = channel_send_test(channel=channel, enqueue=deliver.delay)
        procs.start("worker", [*worker_argv(), "--queues", "alerts"])
        wait_for(
            lambda: Delivery.objects.get(pk=delivery.pk).status == "sent", 60, what="the delivery sent", logs=procs.logs
        )
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.response_status) == (2, 200)
    assert len(r.requests) == 2 and r.requests[0].body == r.requests[1].body  # the same message, retried


def test_a_worker_killed_while_it_sends_and_a_lost_message_are_each_sent_once_by_beat(tmp_path):
    """A worker is SIGKILLed in the middle of a delivery (its claim made, its request sent, no answer yet: the
    receiver hangs), and another delivery's message never reached a worker (a flushed broker). Beat's tidy task
    hands both to a new worker once the claim is stale: each reaches the receiver answered once, the killed one
    again under the same delivery id (what a receiver dedups on), and the killed worker's own message, were the
    broker to hand it out again, sends nothing more."""
    org = Organization.objects.create(name="alerting-tidy")
    env = console_env(ALERTS_TIDY_S="1", ALERTS_CLAIM_STALE_S="3", DISPATCH_TICK_S="3600", ADVISOR_INTERVAL_S="3600")
    with receiver("hang", 200) as r, processes(tmp_path, env) as procs:
        channel = channel_create(organization=org, name="hook", kind="webhook", target=r.url).channel
        first = procs.start("worker", [*worker_argv(), "--queues", "alerts"], ALERTS_TIMEOUT_S="60")
        with transaction.atomic():
            held = channel_send_test(channel=channel, enqueue=deliver.delay)
        wait_for(lambda: len(r.requests) == 1, 60, what="the request in flight", logs=procs.logs)
        first.kill()
        held.refresh_from_db()
        assert (held.status, held.attempts) == ("sending", 1)  # claimed by a worker that is gone
        lost = channel_send_test(channel=channel, enqueue=lambda _: None)
        Delivery.objects.filter(pk=lost.pk).update(next_attempt_at=timezone.now() - timedelta(minutes=5))
        worker = procs.start("worker", [*worker_argv(), "--queues", "alerts"], ALERTS_TIMEOUT_S="2")
        procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        wait_for(
            lambda: set(Delivery.objects.filter(channel=channel).values_list("status", flat=True)) == {"sent"},
            60,
            what="both deliveries sent",
            logs=procs.logs,
        )
        delivered = lambda: succeeded(worker, "alerts.tasks.deliver")  # noqa: E731
        tidied = lambda: succeeded(worker, "alerts.tasks.resend_lost_deliveries")  # noqa: E731
        now_delivered = delivered()
        deliver.delay(held.pk)  # the killed worker's unacknowledged message, handed out again
        wait_for(lambda: delivered() > now_delivered, 30, what="the message handled again", logs=procs.logs)
        wait_for_more(tidied, 2, 30, what="beat's tidy", logs=procs.logs)  # and beat ticks again: nothing more goes out
    ids = [int(req.headers["X-Pgconsole-Delivery"]) for req in r.requests]
    assert sorted(ids) == sorted([held.pk, held.pk, lost.pk])
    again = [req for req in r.requests if int(req.headers["X-Pgconsole-Delivery"]) == held.pk]
    assert again[0].body == again[1].body  # the same message, sent again whole
    held.refresh_from_db()
    assert (held.status, held.attempts, held.response_status) == ("sent", 2, 200)


def test_beat_evaluates_the_rules_in_groups_and_a_worker_sends_each_outage_once_open_and_once_resolved(tmp_path):
    """One server a group (ALERTS_SERVERS_PER_TASK=1), each group a task of its own on the rules' worker, beside
    an organization whose evaluation fails every time: the outages are sent by the alerts worker, each once, opened
    then resolved. Each worker serves its own queue, as compose runs them."""
    org = Organization.objects.create(name="alerting-beat")
    broken = Organization.objects.create(name="alerting-broken")
    Rule.objects.create(organization=broken, name="advice", kind="advisor", min_severity="urgent")  # unknown
    Server.objects.create(organization=broken, name="db0", host="192.0.2.1", user="monitor")
    servers = [Server.objects.create(organization=org, name=f"db{i}", host="192.0.2.1", user="monitor") for i in (1, 2)]
    down_since = timezone.now() - timedelta(minutes=30)
    Server.objects.filter(pk__in=[s.pk for s in servers]).update(
        consecutive_failures=4, last_attempt_at=timezone.now(), last_success_at=down_since
    )
    Rule.objects.create(organization=org, name="down", kind="server_down", hold_minutes=0)
    env = console_env(
        ALERTS_EVALUATE_S="1", ALERTS_SERVERS_PER_TASK="1", DISPATCH_TICK_S="3600", ADVISOR_INTERVAL_S="3600"
    )
    with receiver(200) as r, processes(tmp_path, env) as procs:
        channel_create(organization=org, name="hook", kind="webhook", target=r.url)
        rules = procs.start("rules", [*worker_argv(name="rules"), "--queues", "alert-rules"])
        sending = procs.start("worker", [*worker_argv(), "--queues", "alerts"])
        procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        evaluated = lambda: succeeded(rules, "alerts.tasks.evaluate_alerts")  # noqa: E731
        wait_for(lambda: len(r.requests) == 2, 60, what="both outages sent", logs=procs.logs)
        wait_for_more(evaluated, 2, 30, what="the rules evaluated again", logs=procs.logs)  # nothing more goes out
        assert len(r.requests) == 2
        Server.objects.filter(pk__in=[s.pk for s in servers]).update(
            consecutive_failures=0, last_success_at=timezone.now()
        )
        wait_for(lambda: len(r.requests) == 4, 60, what="both resolutions sent", logs=procs.logs)
        wait_for_more(evaluated, 2, 30, what="the rules evaluated again", logs=procs.logs)
        rules_log, sending_log = rules.text(), sending.text()
    bodies = [json.loads(req.body) for req in r.requests]
    assert sorted((b["alert"]["server"], b["event"]) for b in bodies[:2]) == [("db1", "open"), ("db2", "open")]
    assert sorted((b["alert"]["server"], b["event"]) for b in bodies[2:]) == [("db1", "resolve"), ("db2", "resolve")]
    assert len(r.requests) == 4
    assert set(Delivery.objects.filter(alert__rule__organization=org).values_list("status", flat=True)) == {"sent"}
    assert "alerts.tasks.evaluate_alert_group" in rules_log and "KeyError: 'urgent'" in rules_log
    assert "Task alerts.tasks.deliver[" in sending_log and "Task alerts.tasks.deliver[" not in rules_log
    assert "Task alerts.tasks.evaluate_alert" not in sending_log
