"""/healthz: whether this web process can serve, for a container healthcheck or a load balancer.
No login, plain text, never cached; exempt from the HTTPS redirect (the check asks over plain HTTP)."""

from __future__ import annotations

import logging

from django.contrib.auth.decorators import login_not_required
from django.db import Error, connection
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)

# Anyone who can reach the port reads the reply: say what failed, never how (the error names the host, the user).
HISTORY_STORE_DOWN = "history store not answering"


@login_not_required
@require_GET
@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    """200 `ok` when the history store answers a query (every page needs it), 503 with the reason otherwise."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Error as exc:
        logger.warning("healthz: %s: %s", HISTORY_STORE_DOWN, exc)  # the log is the operator's, not the caller's
        return HttpResponse(HISTORY_STORE_DOWN, status=503, content_type="text/plain; charset=utf-8")
    return HttpResponse("ok", content_type="text/plain; charset=utf-8")


urlpatterns = [path("healthz", healthz, name="healthz")]
