"""Models moved from one app to another in Django's state only (their tables and rows stay): the migration
that makes the source app forget them runs this too, so that their content types move along, and with them
the permissions granted on them and the admin's history of their changes. Used by console/migrations/0002
and 0005 and reports/migrations/0004."""

from django.db import migrations


def move_content_types(models: tuple[str, ...], *, source: str, target: str) -> migrations.RunPython:
    def move(apps, schema_editor, source: str, target: str) -> None:
        ContentType = apps.get_model("contenttypes", "ContentType")
        db = schema_editor.connection.alias
        for model in models:
            # A content type already created for the target (by an earlier post_migrate: a fresh database
            # has none yet) wins; the source's is then left to remove_stale_contenttypes.
            if not ContentType.objects.using(db).filter(app_label=target, model=model).exists():
                ContentType.objects.using(db).filter(app_label=source, model=model).update(app_label=target)

    return migrations.RunPython(
        lambda apps, schema_editor: move(apps, schema_editor, source, target),
        lambda apps, schema_editor: move(apps, schema_editor, target, source),
    )
