from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "reports"
    verbose_name = "Weekly reports and audit exports"
    default_auto_field = "django.db.models.BigAutoField"
