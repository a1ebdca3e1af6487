"""Deliveries sent by a real Celery worker and beat (their own processes, on the tests' Redis and the test
database), as production sends them: a receiver answering 500, then 200, retried after the backoff; a delivery
a killed worker held and one whose message was lost, sent again by beat's tidy task, each once; beat evaluating
the rules every second and a worker sending a server's outage once when it opens and once when it resolves."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from alerts.models import Delivery, Rule
from alerts.services import channel_create, channel_send_test
from alerts.tasks import deliver
from inventory.models import Organization, Server
from tests.alerts.receiver import receiver
from tests.processes import beat_argv, console_env, processes, wait_for, worker_argv

pytestmark = pytest.mark.django_db(transaction=True)


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


def test_beat_sends_again_what_a_killed_worker_held_and_a_lost_message_once_each(tmp_path):
    """A delivery claimed by a worker killed before it sent (left `sending`), and one whose message never
    reached a worker (a flushed broker): beat's tidy task hands both to a worker, and each is sent once."""
    org = Organization.objects.create(name="alerting-tidy")
    env = console_env(ALERTS_TIDY_S="1", ALERTS_CLAIM_STALE_S="2", DISPATCH_TICK_S="3600", ADVISOR_INTERVAL_S="3600")
    with receiver(200) as r, processes(tmp_path, env) as procs:
        channel = channel_create(organization=org, name="hook", kind="webhook", target=r.url).channel
        held = channel_send_test(channel=channel, enqueue=lambda _: None)
        long_ago = timezone.now() - timedelta(minutes=5)
        Delivery.objects.filter(pk=held.pk).update(status="sending", claimed_at=long_ago, attempts=1)
        lost = channel_send_test(channel=channel, enqueue=lambda _: None)
        Delivery.objects.filter(pk=lost.pk).update(next_attempt_at=long_ago)
        procs.start("worker", [*worker_argv(), "--queues", "alerts"])
        procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        wait_for(
            lambda: set(Delivery.objects.filter(channel=channel).values_list("status", flat=True)) == {"sent"},
            60,
            what="both deliveries sent",
            logs=procs.logs,
        )
        time.sleep(3)  # beat ticks again: nothing more goes out
    sent = sorted(int(req.headers["X-Pgconsole-Delivery"]) for req in r.requests)
    assert sent == sorted([held.pk, lost.pk])


def test_beat_evaluates_the_rules_and_a_worker_sends_an_outage_once_open_and_once_resolved(tmp_path):
    org = Organization.objects.create(name="alerting-beat")
    server = Server.objects.create(organization=org, name="db1", host="192.0.2.1", user="monitor")
    down_since = timezone.now() - timedelta(minutes=30)
    Server.objects.filter(pk=server.pk).update(
        consecutive_failures=4, last_attempt_at=timezone.now(), last_success_at=down_since
    )
    Rule.objects.create(organization=org, name="down", kind="server_down", hold_minutes=0)
    env = console_env(ALERTS_EVALUATE_S="1", DISPATCH_TICK_S="3600", ADVISOR_INTERVAL_S="3600")
    with receiver(200, 200, 200) as r, processes(tmp_path, env) as procs:
        channel_create(organization=org, name="hook", kind="webhook", target=r.url)
        procs.start("worker", [*worker_argv(), "--queues", "alerts"])
        procs.start("beat", beat_argv(tmp_path / "beat-schedule"))
        wait_for(lambda: len(r.requests) == 1, 60, what="the outage sent", logs=procs.logs)
        time.sleep(3)  # beat evaluates again: nothing more goes out
        assert len(r.requests) == 1
        Server.objects.filter(pk=server.pk).update(consecutive_failures=0, last_success_at=timezone.now())
        wait_for(lambda: len(r.requests) == 2, 60, what="the resolution sent", logs=procs.logs)
        time.sleep(3)
    assert [json.loads(req.body)["event"] for req in r.requests] == ["open", "resolve"]
    assert set(Delivery.objects.filter(alert__rule__organization=org).values_list("status", flat=True)) == {"sent"}
