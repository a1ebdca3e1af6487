from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"

    def ready(self) -> None:
        from console import (
            checks,  # noqa: F401  (registers the deploy checks)
            two_factor,  # noqa: F401  (at a login: whether the session owes a code)
        )
