from django.apps import AppConfig


class CollectorsConfig(AppConfig):
    """What is read from monitored servers, and the collection that stores it in the history store: the design
    card's collectors. Its label is `collection`: `collectors` is the history store's (its tables, collectors_*,
    were named when both were one app)."""

    name = "collectors"
    label = "collection"
    verbose_name = "Collectors of monitored servers"

    def ready(self) -> None:
        from collectors.connection import isolate_libpq_environment

        isolate_libpq_environment()
