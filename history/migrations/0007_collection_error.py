"""The recent failed collections of each server (history.models.CollectionError), for the server page:
the Server row keeps only the last error."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("collectors", "0006_tier_zero_as_null"), ("inventory", "0001_initial")]

    operations = [
        migrations.CreateModel(
            name="CollectionError",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("at", models.DateTimeField()),
                ("error_class", models.CharField(max_length=40)),
                ("message", models.TextField()),
                (
                    "server",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="collection_errors",
                        to="inventory.server",
                    ),
                ),
            ],
            options={"indexes": [models.Index(fields=["server", "-at"], name="collection_error_recent")]},
        ),
    ]
