from django.apps import AppConfig


class CollectorsConfig(AppConfig):
    name = "collectors"

    def ready(self) -> None:
        from collectors.connection import isolate_libpq_environment

        isolate_libpq_environment()
