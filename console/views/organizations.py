"""(being built) Organizations and their members."""

from django.http import HttpResponse
from django.urls import path


def organizations(request):
    return HttpResponse("organizations")


urlpatterns = [path("organizations/", organizations, name="organizations")]
