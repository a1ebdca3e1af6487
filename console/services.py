"""Deletes of servers and organizations with their history. They span both layers below the console
(inventory's rows, the collectors' history store), so they live here; creates and updates are in
inventory/services.py."""

from collections.abc import Iterable

from django.db import transaction

from history.public import delete_server_history
from inventory.models import Organization, Server


@transaction.atomic
def server_delete(*, server: Server) -> None:
    """Remove a server with its whole history (facts live in partitioned tables without FKs)."""
    # In the same transaction as the row's delete: a collection under way finishes first, and
    # none can store facts after they were deleted (delete_server_history holds its lock to commit).
    delete_server_history(server.pk)
    server.delete()


@transaction.atomic
def servers_delete(*, servers: Iterable[Server]) -> None:
    """server_delete for each of ``servers``, all or none."""
    for server in servers:
        server_delete(server=server)


@transaction.atomic
def organization_delete(*, organization: Organization) -> None:
    """Remove an organization, its memberships and its servers with their history."""
    servers_delete(servers=organization.servers.all())
    organization.delete()


@transaction.atomic
def organizations_delete(*, organizations: Iterable[Organization]) -> None:
    for organization in organizations:
        organization_delete(organization=organization)
