"""A value that is costly to compute, computed once for every web process that asks for it at the same time: kept
in the shared cache (Redis) with when it was computed, and, when it is older than asked, computed again by one
caller only, who holds a lock of its key (`SET NX` with a time limit) while the others are answered with the
previous value or wait briefly for the new one. /metrics reads its figures so (console/views/metrics.py).

With Redis down every caller computes (a warning logged): a cache is never a reason to give no answer."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import redis
from django.core.cache import cache

log = logging.getLogger(__name__)
T = TypeVar("T")
LOCK_S = 60  # the longest one computation holds its key's lock: past it (its process died), another may compute
STALE_S = 60  # how long past its freshness a value is kept, for the callers that come while it is computed again
POLL_S = 0.05


class NotInTime(Exception):
    """Another caller was computing the value, none was kept from before, and it did not come within the wait."""


@dataclass(frozen=True)
class Kept(Generic[T]):
    at: float  # Unix time it was computed
    value: T


def _lock(key: str) -> str:
    return f"{key}:computing"


def _release(key: str, owner: str) -> None:
    # Only our own lock: past LOCK_S it may be another's. (A get and a delete, not atomic: a lock that expires
    # between them costs at most one computation more.)
    if cache.get(_lock(key)) == owner:
        cache.delete(_lock(key))


def _compute(key: str, owner: str, compute: Callable[[], T], keep_s: float) -> T:
    try:
        value = compute()
        cache.set(key, Kept(time.time(), value), keep_s)
        return value
    finally:
        _release(key, owner)


def computed_once(key: str, compute: Callable[[], T], *, fresh_s: float, wait_s: float) -> T:
    """The value kept under `key` when it was computed less than `fresh_s` seconds ago. Else one caller computes
    it (`compute()`) and keeps it; a caller that comes meanwhile gets the previous value (kept up to STALE_S past
    its freshness) at once, or, when there is none, waits up to `wait_s` seconds for the new one: NotInTime past
    that. A caller whose computer gave up (an exception) computes in its place."""
    try:
        return _computed_once(key, compute, fresh_s=fresh_s, wait_s=wait_s)
    except redis.RedisError as exc:
        log.warning("%s computed without the cache: Redis does not answer (%s)", key, exc)
        return compute()


def _computed_once(key: str, compute: Callable[[], T], *, fresh_s: float, wait_s: float) -> T:
    kept = cache.get(key)
    if kept is not None and time.time() - kept.at < fresh_s:
        return kept.value
    deadline = time.monotonic() + wait_s
    while True:
        owner = uuid.uuid4().hex
        if cache.add(_lock(key), owner, LOCK_S):
            return _compute(key, owner, compute, fresh_s + STALE_S)
        if kept is not None:
            return kept.value  # another caller computes the next one
        if time.monotonic() >= deadline:
            raise NotInTime(key)
        time.sleep(POLL_S)
        kept = cache.get(key)
        if kept is not None:
            return kept.value  # the one just computed (there was none before)
