"""The Celery broker as the tests read it: the messages waiting in one queue of the tests' Redis, decoded (task,
arguments, expiry), with no worker to take them; the queue emptied before and after."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import redis
from django.conf import settings


@dataclass(frozen=True)
class Queued:
    task: str
    args: list
    kwargs: dict
    expires: datetime | None


class Queue:
    def __init__(self, name: str):
        self.name = name
        self.client = redis.Redis.from_url(settings.CELERY_BROKER_URL)

    def waiting(self) -> list[Queued]:
        out = []
        for raw in self.client.lrange(self.name, 0, -1):
            message = json.loads(raw)
            args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
            expires = message["headers"].get("expires")
            out.append(Queued(message["headers"]["task"], args, kwargs, expires and datetime.fromisoformat(expires)))
        return out

    def clear(self) -> None:
        self.client.delete(self.name)


@contextmanager
def emptied(name: str) -> Iterator[Queue]:
    queue = Queue(name)
    queue.clear()
    try:
        yield queue
    finally:
        queue.clear()
