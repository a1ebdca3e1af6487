"""When a statement's entry left pg_stat_statements (history/prune.py prunes statements gone long enough).
Those already out of the statement state left at some time before now: they count from now."""

from django.db import migrations, models

MARK_GONE = (
    "UPDATE collectors_statement s SET gone_at = now() WHERE NOT EXISTS "
    "(SELECT FROM collectors_statement_state t WHERE t.server_id = s.server_id AND t.statement_id = s.id)"
)


class Migration(migrations.Migration):
    dependencies = [
        ("collectors", "0009_keys_hold_server_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="statement",
            name="gone_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunSQL(MARK_GONE, migrations.RunSQL.noop),
    ]
