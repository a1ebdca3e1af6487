"""Rate limits: the API's per user (console.api.throttling) and those of the pages that make the console work on
a user's behalf (a connection check dials a server from a worker, a test mail goes out, a preview renders a week
of history), all DRF's throttle over the shared cache (Redis). With Redis down nothing is limited (and a warning
logged): these are brakes against a runaway script or a stuck key, not a lock."""

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


def wait_s(request: HttpRequest, scope: str) -> int:
    """Counts this request against the user's rate for `scope`: 0 when within it, else the seconds to wait."""
    rate = PageRate(scope)
    if rate.allow_request(request, None):
        return 0
    return max(1, math.ceil(rate.wait() or 0))


def wait_text(seconds: int) -> str:
    return f"{seconds} s" if seconds < 120 else f"{-(-seconds // 60)} minutes"


def test_rate(channel_kind: str) -> tuple[str, str]:
    """(scope, what it counts) of a test sent through an alert channel: a mail channel's test is mail (up to 50
    addresses each: the test mail's rate), any other is a request to someone else's service."""
    if channel_kind == "email":
        return "test_mail", "test mails in an hour"
    return "test_alert", "test alerts in an hour"
