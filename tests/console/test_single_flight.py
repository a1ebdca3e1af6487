"""console.single_flight over the tests' Redis: a value computed once however many callers miss it at the same
time (the others get the previous one, or wait for the new one), kept until it is older than asked, computed in
the place of a caller that failed, and computed by every caller when Redis does not answer."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import pytest
import redis
from django.conf import settings as django_settings
from django.core.cache import cache

from console.single_flight import LOCK_S, STALE_S, Kept, NotInTime, computed_once


class Slow:
    """A computation that takes `took_s`, counting its runs (from any thread) and returning the run's number."""

    def __init__(self, took_s: float = 0.3):
        self.took_s, self.runs = took_s, 0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            self.runs += 1
            run = self.runs
        time.sleep(self.took_s)
        return run


def _ttl(key: str) -> int:
    """Seconds Redis keeps the cache's `key` for."""
    return redis.Redis.from_url(django_settings.REDIS_URL).ttl(cache.make_key(key))


def _key() -> str:
    return f"single-flight-test:{uuid.uuid4().hex}"


def _together(n: int, call) -> list:
    """`call()` from `n` threads released at the same moment: their results (an exception counts as one)."""
    results: list = [None] * n
    start = threading.Barrier(n)

    def one(i: int) -> None:
        start.wait()
        try:
            results[i] = call()
        except Exception as exc:  # noqa: BLE001 - the test looks at what each caller got
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_callers_missing_together_compute_once_and_all_get_the_value():
    key, slow = _key(), Slow()
    got = _together(8, lambda: computed_once(key, slow, fresh_s=60, wait_s=5))
    assert slow.runs == 1 and got == [1] * 8
    assert computed_once(key, slow, fresh_s=60, wait_s=5) == 1 and slow.runs == 1  # fresh: kept
    assert cache.get(f"{key}:computing") is None  # the lock let go


def test_a_stale_value_is_computed_again_once_while_the_others_get_the_previous_at_once():
    key, slow = _key(), Slow(took_s=0.5)
    assert computed_once(key, slow, fresh_s=0.2, wait_s=5) == 1
    time.sleep(0.3)  # older than asked
    started = time.monotonic()
    got = _together(6, lambda: (computed_once(key, slow, fresh_s=0.2, wait_s=5), time.monotonic() - started))
    assert slow.runs == 2
    values = sorted(v for v, _ in got)
    assert values == [1, 1, 1, 1, 1, 2], values  # one computed the next; the others were answered the previous
    assert all(took < 0.4 for v, took in got if v == 1), got  # at once, not after the computation
    kept = cache.get(key)
    assert isinstance(kept, Kept) and kept.value == 2
    assert STALE_S - 2 <= _ttl(key) <= STALE_S + 1  # kept past its freshness, for those callers


def test_with_nothing_kept_the_others_wait_for_the_value_and_past_the_wait_are_told_so():
    key, slow = _key(), Slow(took_s=0.6)
    got = _together(2, lambda: computed_once(key, slow, fresh_s=60, wait_s=0.1))
    assert slow.runs == 1
    assert sorted(map(type, got), key=str) == sorted([int, NotInTime], key=str), got
    # A lock held by a computation elsewhere that never ends (its process died): waited for, then NotInTime,
    # until the lock's own time limit lets another compute.
    other = _key()
    cache.add(f"{other}:computing", "elsewhere", LOCK_S)
    started = time.monotonic()
    with pytest.raises(NotInTime):
        computed_once(other, slow, fresh_s=60, wait_s=0.3)
    assert 0.3 <= time.monotonic() - started < 1.5
    assert 0 < _ttl(f"{other}:computing") <= LOCK_S


def test_a_caller_whose_computer_failed_computes_in_its_place():
    key = _key()
    calls = []

    def flaky() -> str:
        calls.append(threading.get_ident())
        time.sleep(0.2)
        if len(calls) == 1:
            raise RuntimeError("the history store went away")
        return "figures"

    got = _together(2, lambda: computed_once(key, flaky, fresh_s=60, wait_s=5))
    assert len(calls) == 2 and "figures" in got
    assert any(isinstance(g, RuntimeError) for g in got)  # the failure is its caller's own
    assert cache.get(f"{key}:computing") is None


def test_with_redis_down_every_caller_computes_and_a_warning_says_so(settings, caplog):
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
    }
    slow = Slow(took_s=0)
    with caplog.at_level(logging.WARNING, logger="console.single_flight"):
        assert [computed_once("k", slow, fresh_s=60, wait_s=1) for _ in range(2)] == [1, 2]
    assert "k computed without the cache: Redis does not answer" in caplog.text
