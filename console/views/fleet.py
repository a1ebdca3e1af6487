"""(being built) The fleet overview."""

from django.http import HttpResponse
from django.urls import path


def fleet(request):
    return HttpResponse("fleet")


urlpatterns = [path("fleet/", fleet, name="fleet")]
