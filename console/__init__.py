"""The console's Django project package: settings, URLs, the Celery app and the web console."""

from .celery import app as celery_app

__all__ = ["celery_app"]
