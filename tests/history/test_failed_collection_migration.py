"""Upgrading a database where a failed collection's record was the model CollectionError: renamed
FailedCollection (history/migrations/0013), its table and rows stay, and its content type follows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from history import partitions
from history.models import FailedCollection
from inventory.models import Organization, Server

BEFORE = [("collectors", "0012_statement_gone_index")]


@pytest.mark.django_db(transaction=True)
def test_failed_collections_recorded_before_the_rename_are_read_after_it():
    org = Organization.objects.create(name="renamed-errors")
    server = Server.objects.create(organization=org, name="db-renamed", host="db.example.com", database="app")
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    at = datetime(2026, 11, 20, tzinfo=UTC)
    apps.get_model("collectors", "CollectionError").objects.create(
        server_id=server.pk, at=at, error_class="timeout", message="no answer in time"
    )
    ContentType.objects.get_or_create(app_label="collectors", model="collectionerror")
    ContentType.objects.filter(app_label="collectors", model="failedcollection").delete()

    # Migrating back dropped the partitioned tables made since (collectors_schema_delta) and migrating again made
    # them anew, without partitions: this process must not think it still has them.
    partitions.forget_cache()
    call_command("migrate", verbosity=0)  # as an upgrade runs it: the command renames the content type

    (row,) = FailedCollection.objects.filter(server=server)
    assert (row.at, row.error_class, row.message) == (at, "timeout", "no answer in time")
    assert ContentType.objects.filter(app_label="collectors", model="failedcollection").exists()
    assert not ContentType.objects.filter(app_label="collectors", model="collectionerror").exists()
