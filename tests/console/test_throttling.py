"""console.throttling: a page's rate per user and scope, counted in Redis under page-rate:<scope>:<user>; within
it the wait is 0, over it the seconds to wait (at least 1), said in seconds or minutes; several scopes at once (an
EXPLAIN's minute and hour) count a request in all or none; /metrics' rate per token and kind; with Redis down
nothing is limited and a warning is logged."""

import logging
import uuid
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.test import RequestFactory

from console.throttling import EXPLAIN_RATES, PageRate, ScrapeRate, scrape_wait_s, wait_s, wait_text

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


def test_a_request_under_several_rates_is_counted_in_all_of_them_or_in_none(settings):
    """An EXPLAIN's rates, a minute's and an hour's: refused by either, it counts against neither, so a user
    refused by the hour does not use up the minute's (nor the other way round)."""
    settings.PAGE_RATES = {**settings.PAGE_RATES, "explain": "3/min", "explain_hourly": "2/hour"}
    request = _request()
    assert [wait_s(request, *EXPLAIN_RATES) for _ in range(2)] == [0, 0]
    refused = wait_s(request, *EXPLAIN_RATES)
    assert 60 < refused <= 3600  # the hour's: the minute had room
    minute, hour = (cache.get(f"page-rate:{scope}:{request.user.pk}") for scope in EXPLAIN_RATES)
    assert len(minute) == 2 and len(hour) == 2  # the refused request counted in neither
    settings.PAGE_RATES = {**settings.PAGE_RATES, "explain": "2/min", "explain_hourly": "10/hour"}
    other = _request()
    assert [wait_s(other, *EXPLAIN_RATES) for _ in range(2)] == [0, 0]
    assert 1 <= wait_s(other, *EXPLAIN_RATES) <= 60  # the minute's, now
    assert len(cache.get(f"page-rate:explain_hourly:{other.user.pk}")) == 2


def test_the_default_explain_rates_are_a_minutes_and_an_hours():
    assert [PageRate(scope).duration for scope in EXPLAIN_RATES] == [60, 3600]


def test_several_rates_with_redis_down_limit_nothing_and_say_so(settings, caplog):
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
    }
    with caplog.at_level(logging.WARNING, logger="console.throttling"):
        assert [wait_s(_request(), *EXPLAIN_RATES) for _ in range(3)] == [0, 0, 0]
    assert "explain/explain_hourly not counted: Redis does not answer" in caplog.text


def test_scrapes_are_rated_per_token_and_kind(settings):
    settings.METRICS = {**settings.METRICS, "RATE": "2/min"}
    token = uuid.uuid4().hex[:8]
    assert [scrape_wait_s(token, "fleet") for _ in range(2)] == [0, 0]
    assert 1 <= scrape_wait_s(token, "fleet") <= 60
    assert scrape_wait_s(token, "statements") == 0  # the other kind: its own count
    assert scrape_wait_s(uuid.uuid4().hex[:8], "fleet") == 0  # another token: its own
    assert len(cache.get(f"metrics-rate:{token}:fleet")) == 2
    assert ScrapeRate("x").duration == 60


@pytest.mark.parametrize(
    "seconds, text",
    [(1, "1 s"), (59, "59 s"), (119, "119 s"), (120, "2 minutes"), (121, "3 minutes"), (3600, "60 minutes")],
)
def test_wait_text_in_seconds_then_whole_minutes_rounded_up(seconds, text):
    assert wait_text(seconds) == text
