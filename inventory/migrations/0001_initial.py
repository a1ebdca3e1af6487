"""Organizations, memberships and servers move here from the console app: in Django's state only.
Their tables (console_organization, console_membership, console_server) stay as they are, with
their rows, constraints and indexes; console/migrations/0002 removes the models from the console's state."""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("console", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="Organization",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=200, unique=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "console_organization",
                    },
                ),
                migrations.CreateModel(
                    name="Membership",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "role",
                            models.CharField(
                                choices=[("viewer", "Viewer"), ("dba", "Dba"), ("admin", "Admin")],
                                default="viewer",
                                max_length=10,
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to="inventory.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_membership",
                        "constraints": [
                            models.UniqueConstraint(fields=("organization", "user"), name="membership_unique")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="Server",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=200)),
                        ("host", models.CharField(max_length=255)),
                        (
                            "port",
                            models.PositiveIntegerField(
                                default=5432,
                                validators=[
                                    django.core.validators.MinValueValidator(1),
                                    django.core.validators.MaxValueValidator(65535),
                                ],
                            ),
                        ),
                        ("database", models.CharField(default="postgres", max_length=255)),
                        ("user", models.CharField(max_length=255)),
                        ("password_encrypted", models.TextField(blank=True, default="", editable=False)),
                        (
                            "sslmode",
                            models.CharField(
                                choices=[
                                    ("disable", "Disable"),
                                    ("allow", "Allow"),
                                    ("prefer", "Prefer"),
                                    ("require", "Require"),
                                    ("verify-ca", "Verify Ca"),
                                    ("verify-full", "Verify Full"),
                                ],
                                default="prefer",
                                max_length=12,
                            ),
                        ),
                        ("enabled", models.BooleanField(default=True)),
                        (
                            "interval_s",
                            models.PositiveIntegerField(
                                default=60, validators=[django.core.validators.MinValueValidator(5)]
                            ),
                        ),
                        ("cpu_count", models.PositiveIntegerField(blank=True, null=True)),
                        ("tags", models.JSONField(blank=True, default=list)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("next_collect_at", models.DateTimeField(blank=True, editable=False, null=True)),
                        ("last_attempt_at", models.DateTimeField(blank=True, editable=False, null=True)),
                        ("last_success_at", models.DateTimeField(blank=True, editable=False, null=True)),
                        ("last_error_class", models.CharField(blank=True, default="", editable=False, max_length=40)),
                        ("last_error_message", models.TextField(blank=True, default="", editable=False)),
                        ("consecutive_failures", models.PositiveIntegerField(default=0, editable=False)),
                        ("status_notes", models.TextField(blank=True, default="", editable=False)),
                        ("server_version_num", models.PositiveIntegerField(blank=True, editable=False, null=True)),
                        ("extension_version", models.CharField(blank=True, default="", editable=False, max_length=20)),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="servers",
                                to="inventory.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_server",
                        "indexes": [models.Index(fields=["enabled", "next_collect_at"], name="server_due_idx")],
                        "constraints": [
                            models.UniqueConstraint(fields=("organization", "name"), name="server_name_unique_per_org")
                        ],
                    },
                ),
            ],
        ),
    ]
