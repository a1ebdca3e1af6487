"""System checks of the console's own deployment (`manage.py check --deploy`)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

PLAIN_HTTP = (
    "HTTPS is off outside DEBUG: logins, session cookies, API tokens and the monitoring passwords typed into the "
    "console cross the network in clear"
)
PLAIN_HTTP_HINT = (
    "Put a reverse proxy that terminates TLS in front of the web server and set HTTPS=true "
    "(docs/operations.md, TLS in front). On a private network where plain HTTP is a deliberate choice, set "
    "ALLOW_PLAIN_HTTP=true."
)


@register(Tags.security, deploy=True)
def plain_http(app_configs=None, **kwargs) -> list:
    if settings.DEBUG or settings.HTTPS:
        return []
    if settings.ALLOW_PLAIN_HTTP:
        return [Warning(PLAIN_HTTP + " (ALLOW_PLAIN_HTTP=true).", id="console.W001")]
    return [Error(PLAIN_HTTP + ".", hint=PLAIN_HTTP_HINT, id="console.E001")]
