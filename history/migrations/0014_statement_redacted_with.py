"""The redaction's version each stored text went through (history.redact.VERSION): the texts stored so far went
through the first; beat redacts those of an older version again (history.tasks.redact_texts_again)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("collectors", "0013_failed_collection"),
        ("inventory", "0003_server_tls"),
    ]

    operations = [
        migrations.AddField(
            model_name="statement",
            name="redacted_with",
            field=models.PositiveSmallIntegerField(db_default=1),
        ),
        migrations.AddIndex(
            model_name="statement",
            index=models.Index(fields=["redacted_with"], name="statement_redacted_with"),
        ),
    ]
