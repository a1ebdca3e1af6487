"""Per-request settings of the console: the user's time zone, the security headers, and a time limit on what a
request may run on the history store."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django.db import OperationalError
from django.db.backends.signals import connection_created
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils import timezone

from console.api.errors import error_body
from history.public import statement_timed_out

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


def _limit_statements(sender, connection, **kwargs) -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT set_config('statement_timeout', %s, false)", [str(settings.WEB_STATEMENT_TIMEOUT_MS)])


class ReadTimeoutMiddleware:
    """Every connection a web process opens to the history store stops a statement after WEB_STATEMENT_TIMEOUT_MS
    (a month of an organization's texts searched 600 times a minute would otherwise hold the store), and a request
    stopped so answers 503 with what to do, as a page or in the API's error shape. The workers' connections have a
    limit of their own (WORKER_STATEMENT_TIMEOUT_MS, console.celery): only the web loads middleware."""

    def __init__(self, get_response):
        self.get_response = get_response
        connection_created.connect(_limit_statements, dispatch_uid="console-web-statement-timeout")

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
        if not (isinstance(exc, OperationalError) and statement_timed_out(exc)):
            return None
        seconds = settings.WEB_STATEMENT_TIMEOUT_MS / 1000
        message = (
            f"This request's reads of the history ran past their limit ({seconds:g} s) and were stopped: "
            "choose a shorter range or narrower filters."
        )
        if request.path.startswith("/api/"):
            return JsonResponse(error_body(503, "read_timeout", message), status=503)
        return HttpResponse(render_to_string("console/read_timeout.html", {"message": message}, request), status=503)
