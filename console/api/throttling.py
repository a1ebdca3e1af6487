"""Throttling per user, whichever of their tokens (or their browser session) a request comes with: 429 with
Retry-After. A user's tokens share one budget, so making more tokens buys no more requests. The counters are in
Redis; with Redis down the API still answers (unthrottled, with a warning logged) rather than failing whole."""

from rest_framework.throttling import SimpleRateThrottle

from console.throttling import FailOpen


class TokenRateThrottle(FailOpen, SimpleRateThrottle):
    scope = "token"

    def get_cache_key(self, request, view):
        # A token authenticates as its user: every token of a user, and their session, share the budget.
        ident = f"user-{request.user.pk}" if request.user and request.user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}
