"""console.throttling: a page's rate per user and scope, counted in Redis under page-rate:<scope>:<user>; within
it the wait is 0, over it the seconds to wait (at least 1), said in seconds or minutes; with Redis down nothing is
limited and a warning is logged."""

import logging
import uuid
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.test import RequestFactory

from console.throttling import PageRate, wait_s, wait_text

SCOPE = "unit-test"


@pytest.fixture(autouse=True)
def _rates(settings):
    settings.PAGE_RATES = {**settings.PAGE_RATES, SCOPE: "2/min", "hourly": "1/hour"}


def _request(pk=None):
    request = RequestFactory().post("/servers/1/check/")
    request.user = SimpleNamespace(pk=pk or uuid.uuid4().hex, is_authenticated=True)  # a fresh id: fresh counters
    return request


def test_the_rate_and_the_cache_key_are_the_scopes_and_the_users():
    rate = PageRate(SCOPE)
    assert (rate.rate, rate.num_requests, rate.duration) == ("2/min", 2, 60)
    assert rate.get_cache_key(_request("42"), None) == "page-rate:unit-test:42"
    assert PageRate("hourly").duration == 3600


def test_an_unknown_scope_is_a_programming_error():
    with pytest.raises(KeyError):
        PageRate("no-such-scope")


def test_within_the_rate_no_wait_then_the_seconds_left():
    request = _request()
    assert [wait_s(request, SCOPE), wait_s(request, SCOPE)] == [0, 0]
    waited = wait_s(request, SCOPE)
    assert 1 <= waited <= 60 and isinstance(waited, int)
    # Counted in the shared cache, under the scope's and the user's key; a refused request is not counted.
    assert len(cache.get(f"page-rate:{SCOPE}:{request.user.pk}")) == 2


def test_each_user_and_each_scope_has_its_own_budget():
    one, other = _request(), _request()
    assert wait_s(one, "hourly") == 0 and wait_s(one, "hourly") > 60
    assert wait_s(other, "hourly") == 0
    assert wait_s(one, SCOPE) == 0


def test_with_redis_down_nothing_is_limited_and_a_warning_says_so(settings, caplog):
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
    }
    request = _request()
    with caplog.at_level(logging.WARNING, logger="console.throttling"):
        assert [wait_s(request, "hourly") for _ in range(3)] == [0, 0, 0]
    assert "hourly not counted: Redis does not answer" in caplog.text


@pytest.mark.parametrize(
    "seconds, text",
    [(1, "1 s"), (59, "59 s"), (119, "119 s"), (120, "2 minutes"), (121, "3 minutes"), (3600, "60 minutes")],
)
def test_wait_text_in_seconds_then_whole_minutes_rounded_up(seconds, text):
    assert wait_text(seconds) == text
