"""Per-request settings of the console: the user's time zone, and the security headers."""

from __future__ import annotations

import zoneinfo

from django.utils import timezone

# No inline script or style anywhere: data for charts travels in json_script blocks (not executed).
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)


class UserTimezoneMiddleware:
    """Shows times in the user's time zone (UserPreference); UTC until they choose one."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        name = "UTC"
        if request.user.is_authenticated:
            name = request.session.get("time_zone") or _stored_zone(request)
        try:
            timezone.activate(zoneinfo.ZoneInfo(name))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            timezone.activate(zoneinfo.ZoneInfo("UTC"))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def _stored_zone(request) -> str:
    from accounts.models import UserPreference

    pref = UserPreference.objects.filter(user=request.user).first()
    name = pref.time_zone if pref else "UTC"
    request.session["time_zone"] = name
    return name


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
