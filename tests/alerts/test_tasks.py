"""A delivery sent by a real Celery worker (its own process, on the tests' Redis and the test database), as
production sends it: the receiver answers 500, then 200; the worker retries after its backoff and the
delivery ends sent, once."""

from __future__ import annotations

import pytest
from django.db import transaction

from alerts.models import Delivery
from alerts.services import channel_create, channel_send_test
from alerts.tasks import deliver
from inventory.models import Organization
from tests.alerts.receiver import receiver
from tests.processes import console_env, processes, wait_for, worker_argv

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
