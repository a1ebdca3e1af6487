"""Rate limits: the API's per user (console.api.throttling) and those of the pages that make the console work on
a user's behalf (a connection check dials a server from a worker, an EXPLAIN asked for runs on a monitored server,
a test mail goes out, a preview renders a week of history), all DRF's throttle over the shared cache (Redis). With
Redis down nothing is limited (and a warning logged): these are brakes against a runaway script or a stuck key, not
a lock."""

from __future__ import annotations

import logging
import math

import redis
from django.conf import settings
from django.http import HttpRequest
from rest_framework.throttling import SimpleRateThrottle

log = logging.getLogger(__name__)


class FailOpen:
    """A throttle that lets the request through when its counters cannot be read."""

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)
        except redis.RedisError as exc:
            log.warning("%s not counted: Redis does not answer (%s)", self.scope, exc)
            return True


class PageRate(FailOpen, SimpleRateThrottle):
    """settings.PAGE_RATES[scope] ("20/min") per user."""

    cache_format = "page-rate:%(scope)s:%(ident)s"

    def __init__(self, scope: str):
        self.scope = scope
        super().__init__()

    def get_rate(self) -> str:
        return settings.PAGE_RATES[self.scope]

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}

    def refused_s(self, request) -> float:
        """The seconds until the user's next request is within this rate (0: it is now), counting nothing: DRF's
        allow_request up to its verdict."""
        self.key = self.get_cache_key(request, None)
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        return 0.0 if len(self.history) < self.num_requests else self.wait() or 0.0


def wait_s(request: HttpRequest, scope: str, *more: str) -> int:
    """Counts this request against the user's rate for `scope` (and for each of `more`: "explain" and its hourly
    rate): 0 when within every one, else the seconds to wait for the last to let it through (counted in none)."""
    if not more:
        rate = PageRate(scope)
        if rate.allow_request(request, None):
            return 0
        return max(1, math.ceil(rate.wait() or 0))
    rates = [PageRate(s) for s in (scope, *more)]
    try:
        if waited := max(rate.refused_s(request) for rate in rates):
            return max(1, math.ceil(waited))
        for rate in rates:
            rate.throttle_success()
    except redis.RedisError as exc:
        log.warning("%s not counted: Redis does not answer (%s)", "/".join(r.scope for r in rates), exc)
    return 0


def wait_text(seconds: int) -> str:
    return f"{seconds} s" if seconds < 120 else f"{-(-seconds // 60)} minutes"


class ScrapeRate(FailOpen, SimpleRateThrottle):
    """settings.METRICS["RATE"] ("30/min") per /metrics token and kind of answer (with statements or without)."""

    scope = "metrics"
    cache_format = "metrics-rate:%(ident)s"

    def __init__(self, ident: str):
        self.ident = ident
        super().__init__()

    def get_rate(self) -> str:
        return settings.METRICS["RATE"]

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"ident": self.ident}


def scrape_wait_s(token_prefix: str, kind: str) -> int:
    """Counts a scrape against its token's rate for `kind`: 0 when within it, else the seconds to wait."""
    rate = ScrapeRate(f"{token_prefix}:{kind}")
    if rate.allow_request(None, None):
        return 0
    return max(1, math.ceil(rate.wait() or 0))


EXPLAIN_RATES = ("explain", "explain_hourly")  # an EXPLAIN asked for (page and API): a minute's and an hour's


def test_rate(channel_kind: str) -> tuple[str, str]:
    """(scope, what it counts) of a test sent through an alert channel: a mail channel's test is mail (up to 50
    addresses each: the test mail's rate), any other is a request to someone else's service."""
    if channel_kind == "email":
        return "test_mail", "test mails in an hour"
    return "test_alert", "test alerts in an hour"
