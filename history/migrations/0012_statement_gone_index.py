"""The prune's candidates through an index: the statements whose entry left pg_stat_statements, instead of a
scan of the whole statement dimension at every maintenance run."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("collectors", "0011_server_state_new_entries"),
        ("inventory", "0002_organization_limits"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="statement",
            index=models.Index(
                condition=models.Q(("gone_at__isnull", False)), fields=["server", "gone_at"], name="statement_gone"
            ),
        ),
    ]
