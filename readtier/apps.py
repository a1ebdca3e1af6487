from django.apps import AppConfig


class ReadtierConfig(AppConfig):
    """The read tier: the selectors every page, report, alert and the advisor read the history through."""

    name = "readtier"
    verbose_name = "Read tier"
