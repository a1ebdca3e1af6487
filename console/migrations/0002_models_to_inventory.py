"""Organizations, memberships and servers now belong to the inventory app (inventory/migrations/0001):
the console forgets them, in Django's state only; their tables stay, with their rows.

Their content types move along, so that permissions granted on them and the admin's history of
their changes stay attached (a fresh database has none yet: post_migrate creates them)."""

from django.db import migrations

MODELS = ("organization", "membership", "server")


def _move_content_types(apps, schema_editor, source: str, target: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MODELS:
        # A content type already created for the target (by an earlier post_migrate) wins; the
        # source's is then left to remove_stale_contenttypes.
        if not ContentType.objects.using(db).filter(app_label=target, model=model).exists():
            ContentType.objects.using(db).filter(app_label=source, model=model).update(app_label=target)


def forwards(apps, schema_editor) -> None:
    _move_content_types(apps, schema_editor, "console", "inventory")


def backwards(apps, schema_editor) -> None:
    _move_content_types(apps, schema_editor, "inventory", "console")


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0001_initial"),
        ("collectors", "0005_server_in_inventory"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                # Membership and Server first: they refer to Organization.
                migrations.DeleteModel(name="Membership"),
                migrations.DeleteModel(name="Server"),
                migrations.DeleteModel(name="Organization"),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
