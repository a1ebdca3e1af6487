"""The lookups the management commands share: a server named on the command line."""

from __future__ import annotations

from django.core.management.base import CommandError

from inventory.models import Server


def find_server(spec: str) -> Server:
    org, _, name = spec.rpartition("/")
    servers = Server.objects.filter(name=name)
    if org:
        servers = servers.filter(organization__name=org)
    found = list(servers.select_related("organization")[:2])
    if not found:
        raise CommandError(f"no server named {spec!r} (see `manage.py servers list`)")
    if len(found) > 1:
        raise CommandError(f"several servers are named {name!r}: use ORG/NAME")
    return found[0]
