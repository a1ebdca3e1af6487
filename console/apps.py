from django.apps import AppConfig
from django.contrib.staticfiles.apps import StaticFilesConfig


class StaticFiles(StaticFilesConfig):
    """collectstatic without what the console never serves: the ReDoc bundle of drf-spectacular's sidecar (the API
    docs are Swagger UI's), 10 of the image's 27 MB of static files and most of its build's compression."""

    ignore_patterns = [*StaticFilesConfig.ignore_patterns, "redoc"]


class ConsoleConfig(AppConfig):
    name = "console"

    def ready(self) -> None:
        from console import (
            checks,  # noqa: F401  (registers the deploy checks)
            two_factor,  # noqa: F401  (at a login: whether the session owes a code)
        )
