"""manage.py servers add|update|list|remove — register the PostgreSQL servers to monitor."""

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.management.base import BaseCommand, CommandError

from console.services import server_delete
from inventory.connection import parse_dsn
from inventory.models import Server
from inventory.services import DEFAULT_ORGANIZATION, server_create, server_update
from inventory.tls import SYSTEM


def _messages(exc: ValidationError) -> str:
    """One line, each message after the field it is about."""
    if not hasattr(exc, "error_dict"):
        return "; ".join(exc.messages)
    return "; ".join(
        message if field == NON_FIELD_ERRORS else f"{field}: {message}"
        for field, messages in exc.message_dict.items()
        for message in messages
    )


class Command(BaseCommand):
    help = "Add, update, list or remove monitored PostgreSQL servers."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="register a server")
        add.add_argument("name")
        add.add_argument("--dsn", required=True, help="libpq DSN or URI of the monitoring role")
        add.add_argument("--org", default=DEFAULT_ORGANIZATION)
        add.add_argument("--interval", type=int, default=60, help="seconds between snapshots (default 60)")
        add.add_argument("--cpus", type=int, default=None, help="CPU count of the server (for the advisor)")
        add.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
        _trust_arguments(add, update=False)
        _tls_arguments(add, scram_default=True)
        add.add_argument(
            "--update",
            action="store_true",
            help="if the server exists, update it to these values (as `servers update`)",
        )
        upd = sub.add_parser(
            "update",
            help="change a server (a new host, port, database or user without a "
            "password in --dsn clears the stored password)",
        )
        upd.add_argument("name")
        upd.add_argument("--org", default=None)
        upd.add_argument("--dsn", default=None, help="new libpq DSN or URI of the monitoring role")
        upd.add_argument("--interval", type=int, default=None, help="seconds between snapshots")
        upd.add_argument("--cpus", type=int, default=None, help="CPU count of the server (for the advisor)")
        upd.add_argument("--tag", action="append", default=None, help="a tag (repeatable; replaces the tags)")
        _trust_arguments(upd, update=True)
        _tls_arguments(upd, scram_default=None)
        enabled = upd.add_mutually_exclusive_group()
        enabled.add_argument("--enable", action="store_true", dest="enable", default=None, help="collect it")
        enabled.add_argument(
            "--disable",
            action="store_false",
            dest="enable",
            default=None,
            help="stop collecting it (its history is kept)",
        )
        lst = sub.add_parser("list", help="list servers")
        lst.add_argument("--json", action="store_true", dest="as_json")
        lst.add_argument("--org", default=None)
        rm = sub.add_parser("remove", help="remove a server and its history")
        rm.add_argument("name")
        rm.add_argument("--org", default=None)

    def handle(self, *args, action, **opts):
        return getattr(self, f"_{action}")(**opts)

    def _add(
        self, *, name, dsn, org, interval, cpus, tag, trust_role, trust_schema, update, ca_cert, require_scram, **_
    ):
        existing = Server.objects.filter(organization__name=org, name=name).first()
        if existing is not None and update:
            return self._update(
                name=name,
                org=org,
                dsn=dsn,
                interval=interval,
                cpus=cpus,
                tag=tag,
                trust_role=trust_role,
                trust_schema=trust_schema,
                enable=None,
                ca_cert=ca_cert,
                require_scram=require_scram,
            )
        try:
            server = server_create(
                name=name,
                connection=parse_dsn(dsn),
                organization_name=org,
                interval_s=interval,
                cpu_count=cpus,
                tags=tag,
                ssl_root_cert=_read_ca(ca_cert) or "",
                require_scram=require_scram,
                plans_trusted_roles=trust_role,
                plans_trusted_schemas=trust_schema,
            )
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from exc
        self.stdout.write(
            f"added {server.organization.name}/{server.name} ({server.endpoint.label}, every {server.interval_s}s)"
        )

    def _update(
        self, *, name, org, dsn, interval, cpus, tag, trust_role, trust_schema, enable, ca_cert, require_scram, **_
    ):
        server = self._one(name, org)
        data: dict = {
            "interval_s": interval,
            "cpu_count": cpus,
            "tags": tag,
            "plans_trusted_roles": trust_role,
            "plans_trusted_schemas": trust_schema,
            "enabled": enable,
            "ssl_root_cert": _read_ca(ca_cert),
            "require_scram": require_scram,
        }
        data = {field: value for field, value in data.items() if value is not None}
        password = None
        had_password = bool(server.password_encrypted)
        try:
            if dsn is not None:
                connection = parse_dsn(dsn)
                data.update(connection.server_fields())
                password = connection.password or None
            server = server_update(server=server, data=data, password=password)
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from exc
        self.stdout.write(
            f"updated {server.organization.name}/{server.name} ({server.endpoint.label}, every {server.interval_s}s)"
        )
        if had_password and not server.password_encrypted:
            self.stderr.write(
                "the stored password was cleared (host, port, database, user, sslmode, CA certificate "
                "or SCRAM requirement changed): give it in --dsn to use it there"
            )

    def _list(self, *, as_json: bool, org, **_):
        servers = Server.objects.select_related("organization").order_by("organization__name", "name")
        if org:
            servers = servers.filter(organization__name=org)
        rows = [
            {
                "organization": s.organization.name,
                "name": s.name,
                **asdict(s.endpoint),
                "has_password": bool(s.password_encrypted),
                "enabled": s.enabled,
                "interval_s": s.interval_s,
                "cpu_count": s.cpu_count,
                "tags": s.tags,
                "plans_trusted_roles": s.plans_trusted_roles,
                "plans_trusted_schemas": s.plans_trusted_schemas,
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
                f"every {r['interval_s']}s  {r['status']}{error}{_trust_text(r)}"
            )

    def _remove(self, *, name, org, **_):
        server = self._one(name, org)
        server_delete(server=server)
        self.stdout.write(f"removed {server.organization.name}/{name} and its history")

    @staticmethod
    def _one(name: str, org: str | None) -> Server:
        servers = Server.objects.select_related("organization").filter(name=name)
        if org:
            servers = servers.filter(organization__name=org)
        found = list(servers)
        if not found:
            raise CommandError(f"no server named {name!r}")
        if len(found) > 1:
            raise CommandError(f"{len(found)} servers are named {name!r}: say which with --org")
        return found[0]


def _trust_arguments(parser, *, update: bool) -> None:
    """--trust-role and --trust-schema, repeatable; on update, any given replaces the list, and --no-trust-roles or
    --no-trust-schemas empties it."""
    replaces = "; replaces the list" if update else ""
    for kind, plural in (("role", "roles"), ("schema", "schemas")):
        group = parser.add_mutually_exclusive_group() if update else parser
        group.add_argument(
            f"--trust-{kind}",
            action="append",
            default=None if update else [],
            metavar="NAME",
            help=f"a {kind} whose functions, operators, casts and checks may run while the console plans a "
            f"statement, named as the catalog spells it (repeatable{replaces})",
        )
        if update:
            group.add_argument(
                f"--no-trust-{plural}",
                action="store_const",
                const=[],
                dest=f"trust_{kind}",
                help=f"empty the list: no {kind} is trusted for plans any more",
            )


def _trust_text(row: dict) -> str:
    """What `servers list` adds to a server's line when it trusts roles or schemas for plans."""
    trusted = [
        f"{kind} {', '.join(row[field])}"
        for kind, field in (("roles", "plans_trusted_roles"), ("schemas", "plans_trusted_schemas"))
        if row[field]
    ]
    return f"  plans trust {'; '.join(trusted)}" if trusted else ""


def _tls_arguments(parser, *, scram_default: bool | None) -> None:
    parser.add_argument(
        "--ca-cert",
        default=None,
        metavar="FILE|system",
        help="the CA certificate(s) to verify the server with (a PEM file, read now and stored with the server; "
        "'' for none), or system for the machine's trusted roots; with sslmode=verify-full in --dsn",
    )
    parser.add_argument(
        "--require-scram",
        action=argparse.BooleanOptionalAction,
        default=scram_default,
        help="send the password only through SCRAM-SHA-256 (default for a new server: yes)",
    )


def _read_ca(value: str | None) -> str | None:
    """--ca-cert: None (unchanged), '' (none), system, or the content of a PEM file."""
    if value in (None, "", SYSTEM):
        return value
    try:
        return Path(value).read_text()
    except OSError as exc:
        raise CommandError(f"--ca-cert: cannot read {value}: {exc.strerror}") from exc
