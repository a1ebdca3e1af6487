"""Template context every console page gets."""

from django.conf import settings
from django.utils import timezone


def console(request) -> dict:
    return {
        "time_zone": timezone.get_current_timezone_name(),
        "debug": settings.DEBUG,
    }
