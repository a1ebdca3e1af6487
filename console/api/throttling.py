"""Throttling per user, whichever of their tokens (or their browser session) a request comes with: 429 with
Retry-After. A user's tokens share one budget, so making more tokens buys no more requests. The counters are in
Redis; with Redis down the API still answers (unthrottled, with a warning logged) rather than failing whole."""

import logging

import redis
from rest_framework.throttling import SimpleRateThrottle

from console.models import ApiToken

log = logging.getLogger(__name__)


class TokenRateThrottle(SimpleRateThrottle):
    scope = "token"

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiToken):
            ident = f"user-{request.auth.user_id}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)
        except redis.RedisError as exc:
            log.warning("API throttling skipped: Redis does not answer (%s)", exc)
            return True
