"""The audit exports and their log move here from the reports app: in Django's state only. Their tables
(reports_auditexport, reports_auditlogentry) stay as they are, with their rows; reports/migrations/0004 removes
the models from the reports' state and moves their content types."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("inventory", "0003_server_tls"),
        ("reports", "0003_export_claim"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="AuditExport",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("server_ids", models.JSONField(default=list)),
                        ("window_start", models.DateTimeField()),
                        ("window_end", models.DateTimeField()),
                        ("formats", models.JSONField(default=list)),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("queued", "Queued"),
                                    ("running", "Running"),
                                    ("done", "Done"),
                                    ("failed", "Failed"),
                                    ("expired", "Expired"),
                                ],
                                default="queued",
                                max_length=8,
                            ),
                        ),
                        ("progress", models.PositiveSmallIntegerField(default=0)),
                        ("step", models.CharField(blank=True, default="", max_length=200)),
                        ("error", models.TextField(blank=True, default="")),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("claim", models.CharField(blank=True, default="", max_length=32)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("file_name", models.CharField(blank=True, default="", max_length=255)),
                        ("sha256", models.CharField(blank=True, default="", max_length=64)),
                        ("size_bytes", models.PositiveBigIntegerField(blank=True, null=True)),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="audit_exports",
                                to="inventory.organization",
                            ),
                        ),
                        (
                            "requested_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reports_auditexport",
                    },
                ),
                migrations.CreateModel(
                    name="AuditLogEntry",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "action",
                            models.CharField(
                                choices=[
                                    ("export_requested", "Export Requested"),
                                    ("export_generated", "Export Generated"),
                                    ("export_failed", "Export Failed"),
                                    ("export_downloaded", "Export Downloaded"),
                                    ("export_expired", "Export Expired"),
                                ],
                                max_length=20,
                            ),
                        ),
                        ("at", models.DateTimeField()),
                        ("detail", models.TextField(blank=True, default="")),
                        (
                            "export",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="log",
                                to="exports.auditexport",
                            ),
                        ),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="audit_log",
                                to="inventory.organization",
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reports_auditlogentry",
                        "ordering": ["-at", "-id"],
                    },
                ),
                migrations.AddIndex(
                    model_name="auditexport",
                    index=models.Index(fields=["organization", "-created_at"], name="audit_export_recent"),
                ),
                migrations.AddIndex(
                    model_name="auditlogentry",
                    index=models.Index(fields=["organization", "-at"], name="audit_log_recent"),
                ),
            ],
        ),
    ]
