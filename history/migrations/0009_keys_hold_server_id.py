"""Every history table's primary key holds server_id, the distribution column a sharded history store
(Citus) needs (docs/operations.md, "Scaling out"): the statement dimension and the failed collections were keyed by id
alone. Ids stay unique (one sequence each); an index on id keeps a look-up by id alone quick."""

from django.db import migrations, models

KEYS = ("collectors_statement", "collectors_collectionerror")


def _swap(columns: str) -> list[str]:
    return [
        f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, ADD CONSTRAINT {table}_pkey PRIMARY KEY ({columns})"
        for table in KEYS
    ]


class Migration(migrations.Migration):
    dependencies = [
        ("collectors", "0008_text_pending"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="statement",
            index=models.Index(fields=["id"], name="statement_id"),
        ),
        migrations.RunSQL(_swap("server_id, id"), _swap("id")),
    ]
