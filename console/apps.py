from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    default = True  # the one Django takes for "console", whatever else this module may hold

    def ready(self) -> None:
        from console import (
            deploy_checks,  # noqa: F401  (registers the deploy checks)
            two_factor,  # noqa: F401  (at a login: whether the session owes a code)
        )
