"""Upgrading a database where the audit exports were the reports app's: the move to exports/ is in Django's
state only, so their rows stay, readable through the new models, with their content types."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from exports.models import AuditExport, AuditLogEntry
from inventory.models import Organization

BEFORE = [("reports", "0003_export_claim"), ("exports", None)]


@pytest.mark.django_db(transaction=True)
def test_exports_and_their_log_written_before_the_move_are_read_after_it():
    org = Organization.objects.create(name="moved-exports")
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state([("reports", "0003_export_claim")]).apps
    at = datetime(2026, 11, 20, tzinfo=UTC)
    export = apps.get_model("reports", "AuditExport").objects.create(
        organization_id=org.pk, window_start=at, window_end=at, formats=["json"], status="done"
    )
    apps.get_model("reports", "AuditLogEntry").objects.create(
        organization_id=org.pk, action="export_generated", export_id=export.pk, at=at
    )
    ContentType.objects.get_or_create(app_label="reports", model="auditexport")
    ContentType.objects.filter(app_label="exports").delete()

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    moved = AuditExport.objects.get(organization=org)
    assert moved.status == "done" and moved.formats == ["json"]
    assert AuditLogEntry.objects.get(organization=org).export_id == moved.pk
    assert ContentType.objects.filter(app_label="exports", model="auditexport").exists()
    assert not ContentType.objects.filter(app_label="reports", model="auditexport").exists()
