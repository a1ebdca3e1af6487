"""User preferences and API tokens now belong to the accounts app (accounts/migrations/0001): the console
forgets them, in Django's state only; their tables stay, with their rows. Their content types move along, so
that permissions granted on them and the admin's history stay attached (as in 0002 for the inventory)."""

from django.db import migrations

MODELS = ("userpreference", "apitoken")


def _move_content_types(apps, schema_editor, source: str, target: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MODELS:
        if not ContentType.objects.using(db).filter(app_label=target, model=model).exists():
            ContentType.objects.using(db).filter(app_label=source, model=model).update(app_label=target)


def forwards(apps, schema_editor) -> None:
    _move_content_types(apps, schema_editor, "console", "accounts")


def backwards(apps, schema_editor) -> None:
    _move_content_types(apps, schema_editor, "accounts", "console")


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0004_api_token"),
        ("accounts", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="UserPreference"), migrations.DeleteModel(name="ApiToken")],
        ),
        migrations.RunPython(forwards, backwards),
    ]
