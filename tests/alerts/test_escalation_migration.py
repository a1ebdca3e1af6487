"""Upgrading a database with open alerts: an alert notified before escalations were notified counts as notified at
the severity it has, so the upgrade sends nothing by itself; one never notified stays to be notified."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from alerts.models import Alert
from inventory.models import Organization, Server

BEFORE = [("alerts", "0002_rules_alerts")]


@pytest.mark.django_db(transaction=True)
def test_alerts_notified_before_the_upgrade_said_the_severity_they_have():
    org = Organization.objects.create(name="escalation-upgrade")
    server = Server.objects.create(organization=org, name="db1", host="192.0.2.1", user="monitor")
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    at = datetime(2026, 11, 20, tzinfo=UTC)
    rule = apps.get_model("alerts", "Rule").objects.create(organization_id=org.pk, name="advice", kind="advisor")
    made = {}
    for key, notified in (("notified", at), ("pending", None)):
        made[key] = apps.get_model("alerts", "Alert").objects.create(
            rule=rule,
            server_id=server.pk,
            key=key,
            state="open" if notified else "pending",
            since=at,
            first_true_at=at,
            last_true_at=at,
            notified_open_at=notified,
            severity="critical",
            title="t",
            summary="s",
            path="/",
        )

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert Alert.objects.get(pk=made["notified"].pk).notified_severity == "critical"
    assert Alert.objects.get(pk=made["pending"].pk).notified_severity == ""
