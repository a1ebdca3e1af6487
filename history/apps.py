from django.apps import AppConfig


class HistoryConfig(AppConfig):
    """The history store. Its label is still `collectors`, the app it was part of: its tables (collectors_*),
    its migrations and its content types are named after it."""

    name = "history"
    label = "collectors"
    verbose_name = "History store"
