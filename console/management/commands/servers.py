"""manage.py servers add|list|remove — register the PostgreSQL servers to monitor."""
import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from console.models import Server
from console.services import DEFAULT_ORGANIZATION, server_create, server_delete


class Command(BaseCommand):
    help = "Add, list or remove monitored PostgreSQL servers."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="register a server")
        add.add_argument("name")
        add.add_argument("--dsn", required=True, help="libpq DSN or URI of the monitoring role")
        add.add_argument("--org", default=DEFAULT_ORGANIZATION)
        add.add_argument("--interval", type=int, default=60, help="seconds between snapshots (default 60)")
        add.add_argument("--cpus", type=int, default=None, help="CPU count of the server (for the advisor)")
        add.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
        lst = sub.add_parser("list", help="list servers")
        lst.add_argument("--json", action="store_true", dest="as_json")
        lst.add_argument("--org", default=None)
        rm = sub.add_parser("remove", help="remove a server and its history")
        rm.add_argument("name")
        rm.add_argument("--org", default=None)

    def handle(self, *args, action, **opts):
        return getattr(self, f"_{action}")(**opts)

    def _add(self, *, name, dsn, org, interval, cpus, tag, **_):
        try:
            server = server_create(
                name=name, dsn=dsn, organization_name=org, interval_s=interval, cpu_count=cpus, tags=tag
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(f"added {server.organization.name}/{server.name} ({server.user}@{server.host}:"
                          f"{server.port}/{server.database}, every {server.interval_s}s)")  # fmt: skip

    def _list(self, *, as_json: bool, org, **_):
        servers = Server.objects.select_related("organization").order_by("organization__name", "name")
        if org:
            servers = servers.filter(organization__name=org)
        rows = [
            {
                "organization": s.organization.name,
                "name": s.name,
                "host": s.host,
                "port": s.port,
                "database": s.database,
                "user": s.user,
                "sslmode": s.sslmode,
                "has_password": bool(s.password_encrypted),
                "enabled": s.enabled,
                "interval_s": s.interval_s,
                "cpu_count": s.cpu_count,
                "tags": s.tags,
                "status": s.status,
                "last_success_at": s.last_success_at.isoformat() if s.last_success_at else None,
                "last_error_class": s.last_error_class or None,
                "last_error_message": s.last_error_message or None,
                "consecutive_failures": s.consecutive_failures,
                "server_version_num": s.server_version_num,
                "extension_version": s.extension_version or None,
                "notes": s.status_notes or None,
            }
            for s in servers
        ]
        if as_json:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("no servers registered: add one with `manage.py servers add NAME --dsn DSN`")
            return
        for r in rows:
            error = f"  [{r['last_error_class']}] {r['last_error_message']}" if r["last_error_class"] else ""
            self.stdout.write(
                f"{r['organization']}/{r['name']:<20} {r['user']}@{r['host']}:{r['port']}/{r['database']:<12} "
                f"every {r['interval_s']}s  {r['status']}{error}"
            )

    def _remove(self, *, name, org, **_):
        servers = Server.objects.filter(name=name)
        if org:
            servers = servers.filter(organization__name=org)
        found = list(servers)
        if not found:
            raise CommandError(f"no server named {name!r}")
        if len(found) > 1:
            raise CommandError(f"{len(found)} servers are named {name!r}: say which with --org")
        server_delete(server=found[0])
        self.stdout.write(f"removed {found[0].organization.name}/{name} and its history")
