"""The static files app as the console collects it (INSTALLED_APPS names this config instead of Django's)."""

from django.contrib.staticfiles.apps import StaticFilesConfig


class StaticFiles(StaticFilesConfig):
    """collectstatic without what the console never serves: the ReDoc bundle of drf-spectacular's sidecar (the API
    docs are Swagger UI's), 10 of the image's 27 MB of static files and most of its build's compression."""

    ignore_patterns = [*StaticFilesConfig.ignore_patterns, "redoc"]
