"""Error pages in the console's look (handler403/404/500); under /api/ the API's one error shape instead."""

from django.http import HttpResponseServerError, JsonResponse
from django.shortcuts import render
from django.template import loader


def _api_error(request, status: int, code: str, message: str) -> JsonResponse | None:
    if not request.path.startswith("/api/"):
        return None
    return JsonResponse({"status": status, "code": code, "message": message, "errors": {}}, status=status)


def forbidden(request, exception=None):
    api = _api_error(request, 403, "permission_denied", str(exception or "permission denied"))
    return api or render(request, "403.html", {"reason": str(exception or "")}, status=403)


def not_found(request, exception=None):
    api = _api_error(request, 404, "not_found", f"no such URL: {request.path} (see /api/docs/)")
    return api or render(request, "404.html", {}, status=404)


def server_error(request):
    api = _api_error(request, 500, "server_error", "the server failed; the error is logged")
    # No context processors: whatever failed may fail again while rendering.
    return api or HttpResponseServerError(loader.get_template("500.html").render({}))
