from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "reports"
    verbose_name = "Weekly reports and audit exports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Celery's autodiscovery imports each app's tasks.py only: the audit export's task is registered here.
        from reports import export_tasks  # noqa: F401
        from reports.export_files import remove_files_with_rows

        remove_files_with_rows()
