"""(being built) Server management."""

from django.http import HttpResponse
from django.urls import path


def servers(request):
    return HttpResponse("servers")


urlpatterns = [path("manage/servers/", servers, name="manage-servers")]
