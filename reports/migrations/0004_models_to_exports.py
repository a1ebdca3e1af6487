"""The audit exports and their log now belong to the exports app (exports/migrations/0001): the reports app
forgets them, in Django's state only; their tables stay, with their rows. Their content types move along, so
that permissions granted on them and the admin's history stay attached (as console/migrations/0005 did for
the accounts)."""

from django.db import migrations

from inventory.app_moves import move_content_types

MODELS = ("auditexport", "auditlogentry")


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0003_export_claim"),
        ("exports", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(model_name="auditlogentry", name="export"),
                migrations.DeleteModel(name="AuditLogEntry"),
                migrations.DeleteModel(name="AuditExport"),
            ],
        ),
        move_content_types(MODELS, source="reports", target="exports"),
    ]
