"""The stored record of a failed collection is FailedCollection, no longer CollectionError (the exception's
name, collectors.errors): the table keeps its name and its rows, the content type is renamed with the model."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("collectors", "0012_statement_gone_index"), ("inventory", "0003_server_tls")]

    operations = [
        migrations.AlterModelTable(name="collectionerror", table="collectors_collectionerror"),
        migrations.RenameModel(old_name="CollectionError", new_name="FailedCollection"),
    ]
