"""console/queues.py on the real broker (Redis): the tasks waiting in each queue and how long the oldest has
waited, from the sent-at header every task carries from its publisher; a head without one (sent by an older
version) has no age, an empty queue neither."""

from __future__ import annotations

import json
import os
import time

import pytest
import redis
from kombu import Queue

from console.celery import SENT_AT_HEADER
from console.celery import app as celery_app
from console.queues import queue_depths


@pytest.fixture
def probe(settings):
    name = f"queues-probe-{os.getpid()}"
    settings.CELERY_TASK_QUEUES = (Queue(name), Queue(f"{name}-empty"))
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield name, broker
    broker.delete(name, f"{name}-empty")


def test_waiting_tasks_and_the_oldest_ones_age(probe):
    name, broker = probe
    celery_app.send_task("pgconsole.queues_probe", queue=name)
    oldest = json.loads(broker.lindex(name, -1))["headers"][SENT_AT_HEADER]
    celery_app.send_task("pgconsole.queues_probe", queue=name)
    depth, empty = queue_depths(now=oldest + 42.0)
    assert (depth.name, depth.waiting) == (name, 2)
    assert depth.oldest_age_s == pytest.approx(42.0)  # the first sent, not the last
    assert (empty.waiting, empty.oldest_age_s) == (0, None)


def test_a_head_without_the_header_has_no_age(probe):
    name, broker = probe
    broker.lpush(name, json.dumps({"body": "", "headers": {"task": "old"}, "properties": {}}))
    (depth, _) = queue_depths(now=time.time())
    assert (depth.waiting, depth.oldest_age_s) == (1, None)
    broker.rpush(name, b"not json")  # the head now: unreadable, never an error
    assert queue_depths()[0].oldest_age_s is None
