"""Error pages in the console's look (handler403/404/500)."""

from django.http import HttpResponseServerError
from django.shortcuts import render
from django.template import loader


def forbidden(request, exception=None):
    return render(request, "403.html", {"reason": str(exception or "")}, status=403)


def not_found(request, exception=None):
    return render(request, "404.html", {}, status=404)


def server_error(request):
    # No context processors: whatever failed may fail again while rendering.
    return HttpResponseServerError(loader.get_template("500.html").render({}))
