"""User preferences and API tokens now belong to the accounts app (accounts/migrations/0001): the console
forgets them, in Django's state only; their tables stay, with their rows. Their content types move along, so
that permissions granted on them and the admin's history stay attached (as in 0002 for the inventory)."""

from django.db import migrations

from inventory.app_moves import move_content_types

MODELS = ("userpreference", "apitoken")


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
        move_content_types(MODELS, source="console", target="accounts"),
    ]
