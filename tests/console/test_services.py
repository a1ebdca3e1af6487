"""console/services.py: a deleted server or organization takes its whole history with it."""

import pytest

from console.services import organization_delete, server_delete
from history.tables import TABLES
from inventory.models import Organization, Server

pytestmark = pytest.mark.django_db


def test_server_delete_removes_its_whole_history_and_only_its_own(collected_server, history_rows):
    gone, kept = collected_server("gone"), collected_server("kept")
    kept_rows = history_rows(kept.pk)
    server_delete(server=gone)
    assert not Server.objects.filter(pk=gone.pk).exists()
    assert set(history_rows(gone.pk).values()) == {0}
    assert history_rows(kept.pk) == kept_rows


def test_organization_delete_removes_its_servers_with_their_history(collected_server, history_rows):
    gone, kept = collected_server("a", org="leaving"), collected_server("b", org="staying")
    organization_delete(organization=gone.organization)
    assert not Organization.objects.filter(name="leaving").exists()
    assert set(history_rows(gone.pk).values()) == {0}
    assert history_rows(kept.pk)[TABLES.SNAPSHOT.name] == 2
