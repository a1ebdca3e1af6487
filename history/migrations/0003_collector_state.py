"""The lineage of a server's statistics in its state, and why a statement has no text."""

from django.db import migrations, models

# Texts missing before this migration were almost always evicted between the counters' read and
# the texts' read (a key's queryid is visible only where its text is): read them again.
MARK_MISSING = "UPDATE collectors_statement SET text_status = 'evicted' WHERE query IS NULL"


class Migration(migrations.Migration):
    dependencies = [("collectors", "0002_history_tables")]

    operations = [
        migrations.AddField(
            model_name="serverstate", name="system_identifier", field=models.BigIntegerField(null=True)
        ),
        migrations.AddField(model_name="serverstate", name="timeline_id", field=models.IntegerField(null=True)),
        migrations.AddField(model_name="serverstate", name="in_recovery", field=models.BooleanField(null=True)),
        migrations.AddField(model_name="serverstate", name="reads_all_stats", field=models.BooleanField(null=True)),
        migrations.AddField(model_name="serverstate", name="role_oid", field=models.BigIntegerField(null=True)),
        migrations.AddField(
            model_name="statement",
            name="text_status",
            field=models.TextField(
                choices=[
                    ("stored", "stored"),
                    ("evicted", "evicted before its text could be read"),
                    ("not_visible", "not visible to the monitoring role"),
                    ("unavailable", "not kept by pg_stat_statements"),
                ],
                default="stored",
            ),
        ),
        migrations.RunSQL(MARK_MISSING, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="statement",
            index=models.Index(
                condition=models.Q(("text_status", "stored"), _negated=True),
                fields=["server"],
                name="statement_text_missing",
            ),
        ),
    ]
