"""The Celery queues as the broker (Redis) holds them: how many tasks wait in each, and how long its oldest has
waited (from the sent-at header every task carries, console/celery.py). Read by /metrics for the console's
operators; one LLEN and one LINDEX per queue."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import redis
from django.conf import settings

from console.celery import SENT_AT_HEADER


@dataclass(frozen=True)
class QueueDepth:
    name: str
    waiting: int
    oldest_age_s: float | None  # None: empty, or its head carries no sent-at header (sent by an older version)


def _sent_at(raw: bytes | None) -> float | None:
    """The sent-at header of a message as kombu's Redis transport keeps it (JSON: body, headers, properties)."""
    if raw is None:
        return None
    try:
        value = json.loads(raw).get("headers", {}).get(SENT_AT_HEADER)
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) else None


def queue_depths(*, now: float | None = None) -> list[QueueDepth]:
    """Every queue of CELERY_TASK_QUEUES. The transport pushes on the left and workers take from the right: the
    right end is the oldest."""
    now = time.time() if now is None else now
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=2)
    try:
        out = []
        for queue in settings.CELERY_TASK_QUEUES:
            waiting = int(client.llen(queue.name))
            sent_at = _sent_at(client.lindex(queue.name, -1)) if waiting else None
            out.append(QueueDepth(queue.name, waiting, None if sent_at is None else max(0.0, now - sent_at)))
        return out
    finally:
        client.close()
