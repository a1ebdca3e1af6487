"""manage.py collect --server NAME | --all — take snapshots now, synchronously, one line per server."""

from django.core.management.base import BaseCommand, CommandError

from collectors.errors import HistoryUnavailable
from collectors.services import server_collect
from inventory.lookups import find_server
from inventory.models import Server


class Command(BaseCommand):
    help = "Collect one snapshot of the given server (or of every enabled server) now."

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--server", help="server name (ORG/NAME when names repeat across organizations)")
        which.add_argument("--all", action="store_true", help="every enabled server")

    def handle(self, *args, server=None, all=False, **opts):
        if all:
            servers = list(Server.objects.filter(enabled=True).order_by("name"))
        else:
            servers = [find_server(server)]
        failures = 0
        for s in servers:
            try:
                result = server_collect(server_id=s.pk)
            except HistoryUnavailable as exc:
                raise CommandError(str(exc)) from exc
            failures += not result.ok and result.kind != "busy"
            self.stdout.write(result.summary())
        if failures and not all:
            raise CommandError(f"{failures} collection(s) failed")
