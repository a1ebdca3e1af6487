from django.apps import AppConfig


class ExportsConfig(AppConfig):
    name = "exports"
    verbose_name = "Audit exports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from exports.files import remove_files_with_rows

        remove_files_with_rows()
