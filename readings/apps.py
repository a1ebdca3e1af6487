from django.apps import AppConfig


class ReadingsConfig(AppConfig):
    """What is read from monitored servers, and the collection that stores it in the history store."""

    name = "readings"
    verbose_name = "Readings of monitored servers"

    def ready(self) -> None:
        from readings.connection import isolate_libpq_environment

        isolate_libpq_environment()
