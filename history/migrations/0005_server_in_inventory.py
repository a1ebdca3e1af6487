"""The history's links to a server point at inventory.Server (moved from the console app), in Django's
state only: the table they reference, console_server, is the same, so no column or constraint changes.

Snapshot.server is not here: Snapshot is unmanaged (a partitioned table), and Django's state keeps no
related fields of unmanaged models."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("collectors", "0004_read_tier"), ("inventory", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name="statement",
                    name="server",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="statements", to="inventory.server"
                    ),
                ),
                migrations.AlterField(
                    model_name="serverstate",
                    name="server",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="collector_state",
                        serialize=False,
                        to="inventory.server",
                    ),
                ),
            ],
        ),
    ]
