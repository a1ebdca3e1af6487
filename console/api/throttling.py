"""Throttling per user, whichever of their tokens (or their browser session) a request comes with: 429 with
Retry-After. A user's tokens share one budget, so making more tokens buys no more requests. The counters are in
Redis; with Redis down the API still answers (unthrottled, with a warning logged) rather than failing whole."""

from rest_framework import exceptions
from rest_framework.throttling import SimpleRateThrottle

from console import throttling
from console.throttling import FailOpen


class TokenRateThrottle(FailOpen, SimpleRateThrottle):
    scope = "token"

    def get_cache_key(self, request, view):
        # A token authenticates as its user: every token of a user, and their session, share the budget.
        ident = f"user-{request.user.pk}" if request.user and request.user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


def page_rate(request, scope: str | tuple[str, ...], what: str) -> None:
    """An operation that makes the console work on the user's behalf (a connection check dials a server from a
    worker, an EXPLAIN runs on a monitored server, a test sends to someone else's service): the pages' rate for
    `scope`, or for each of several (settings.PAGE_RATES), counted with theirs, so the API buys no more of it than
    the pages do. 429 with Retry-After past it."""
    scopes = (scope,) if isinstance(scope, str) else scope
    if wait := throttling.wait_s(request, *scopes):
        raise exceptions.Throttled(wait=wait, detail=f"Too many {what}: try again in {throttling.wait_text(wait)}.")
