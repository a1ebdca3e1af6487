"""Organizations, memberships and servers now belong to the inventory app (inventory/migrations/0001):
the console forgets them, in Django's state only; their tables stay, with their rows.

Their content types move along, so that permissions granted on them and the admin's history of
their changes stay attached (a fresh database has none yet: post_migrate creates them)."""

from django.db import migrations

from inventory.app_moves import move_content_types

MODELS = ("organization", "membership", "server")


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
        move_content_types(MODELS, source="console", target="inventory"),
    ]
