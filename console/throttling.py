"""Rate limits of the pages that make the console work on a user's behalf: a connection check dials a server
from a worker, a test mail goes out, a preview renders a week of history. Counted per user and scope in the
shared cache (Redis), in fixed windows; with Redis down nothing is limited (and a warning logged): these are
brakes against a runaway script or a stuck key, not a lock."""

from __future__ import annotations

import logging
import time

import redis
from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

log = logging.getLogger(__name__)


def wait_s(request: HttpRequest, scope: str) -> int:
    """Counts this request against the user's rate for `scope` (settings.PAGE_RATES: requests per seconds);
    0 when within it, else the seconds until the window ends."""
    count, per_s = settings.PAGE_RATES[scope]
    now = time.time()
    key = f"page-rate:{scope}:{request.user.pk}:{int(now // per_s)}"
    try:
        cache.add(key, 0, per_s)
        used = cache.incr(key)
    except (redis.RedisError, ValueError) as exc:  # ValueError: the key expired between add and incr
        log.warning("page rate %s not counted: %s", scope, exc)
        return 0
    return 0 if used <= count else max(1, int(per_s - now % per_s))


def wait_text(seconds: int) -> str:
    return f"{seconds} s" if seconds < 120 else f"{-(-seconds // 60)} minutes"
