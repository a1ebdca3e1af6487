"""Brakes on password guessing (django-axes) and on sessions left open: who the client is, what a locked-out
login attempt answers, and how long an idle session lives.

django-axes counts failed logins per client address and per user name in the history store (so a web process
restarted or Redis down forgets nothing and locks nobody out by accident); every `authenticate()` goes through
its backend, the console's login page and the admin's alike.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.db.models import Max, Q
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone


def client_ip(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or behind TRUSTED_PROXIES reverse proxies the address the outermost
    of them put in X-Forwarded-For (entries a client wrote itself come before it and are ignored)."""
    proxies = settings.TRUSTED_PROXIES
    if proxies > 0:
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
        if len(hops) >= proxies:
            return hops[-proxies]
    return request.META.get("REMOTE_ADDR", "")


def locked_out_minutes(*, ip_address: str, username: str | None, now=None) -> int:
    """Whole minutes until the lock on this address or user name ends (at least 1): the cool-off runs from the
    latest failure that counts against either."""
    from axes.models import AccessAttempt

    now = now or timezone.now()
    cool_off: timedelta = settings.AXES_COOLOFF_TIME
    which = Q(ip_address=ip_address) | (Q(username=username) if username else Q())
    latest = AccessAttempt.objects.filter(which, attempt_time__gte=now - cool_off).aggregate(t=Max("attempt_time"))
    left = (latest["t"] + cool_off - now) if latest["t"] else cool_off
    return max(1, math.ceil(left.total_seconds() / 60))


def lockout_response(request: HttpRequest, original_response=None, credentials: dict | None = None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the login page again, saying why and for how long, with 429 Too Many Requests."""
    username = (credentials or {}).get("username") or request.POST.get("username") or None
    ip_address = getattr(request, "axes_ip_address", client_ip(request))
    minutes = locked_out_minutes(ip_address=ip_address, username=username)
    response = TemplateResponse(
        request,
        "registration/login.html",
        {"locked_out_minutes": minutes, "username": username or "", "next": request.POST.get("next", "")},
        status=429,
    )
    response["Retry-After"] = str(minutes * 60)
    return response.render()


class IdleSessionMiddleware:
    """A session ends after SESSION_COOKIE_AGE without a request: each request older than a quarter of that
    (at most a minute) since the last renewal saves the session again, which moves its expiry on."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        if session is not None and session.session_key and request.user.is_authenticated:
            now = int(timezone.now().timestamp())
            every_s = min(60, settings.SESSION_COOKIE_AGE // 4)
            if now - session.get("renewed_at", 0) >= every_s:
                session["renewed_at"] = now  # modified: saved with a new expiry, and the cookie sent again
        return self.get_response(request)
