"""manage.py export --org ORG [--server NAME ...] --from ISO --to ISO --out DIR [--format pdf,xlsx,csv,json]:
the audit bundle of the console's exports, written into a folder (each file, SHA256SUMS and the zip)."""

from __future__ import annotations

import getpass
import zoneinfo
from datetime import datetime
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from exports.formats.bundle import FORMATS
from exports.services import ExportError, audit_export_write, export_window
from inventory.models import Organization, Server


def _time(name: str, raw: str) -> datetime:
    try:
        value = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"--{name} {raw!r} is not an ISO 8601 time (e.g. 2026-11-09T00:00:00Z)") from None
    if value.tzinfo is None:
        raise CommandError(f"--{name} {raw!r} has no UTC offset (add Z or +01:00)")
    return value


def _operator() -> str:
    """Who ran it, for the audit log (the login name, where the system knows one)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


class Command(BaseCommand):
    help = "Write an organization's audit bundle (PDF, XLSX, CSV, JSON with its schema, SHA256SUMS) into a folder."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="the organization's name (or id)")
        parser.add_argument(
            "--server",
            action="append",
            default=[],
            metavar="NAME",
            help="a server of that organization (repeat it; default: all of them)",
        )
        parser.add_argument("--from", dest="start", required=True, help="window start, ISO 8601 with an offset")
        parser.add_argument("--to", dest="end", required=True, help="window end, ISO 8601 with an offset")
        parser.add_argument("--out", required=True, help="the folder to write into (created if needed)")
        parser.add_argument("--format", default=",".join(FORMATS), help=f"among {','.join(FORMATS)} (default all)")
        parser.add_argument("--time-zone", default="UTC", help="the PDF's times (default UTC)")

    def handle(self, *args, **opts):
        org = Organization.objects.filter(name=opts["org"]).first()
        if org is None and opts["org"].isdigit():
            org = Organization.objects.filter(pk=int(opts["org"])).first()
        if org is None:
            raise CommandError(f"no organization {opts['org']!r}")
        names = dict(Server.objects.filter(organization=org).values_list("name", "pk"))
        if unknown := [n for n in opts["server"] if n not in names]:
            raise CommandError(
                f"not servers of {org.name}: {', '.join(unknown)} (its servers: {', '.join(sorted(names)) or 'none'})"
            )
        formats = [f.strip() for f in opts["format"].split(",") if f.strip()]
        try:
            zoneinfo.ZoneInfo(opts["time_zone"])
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise CommandError(f"--time-zone {opts['time_zone']!r} is not a time zone (e.g. Europe/Paris)") from None
        out = Path(opts["out"])
        try:
            window = export_window(start=_time("from", opts["start"]), end=_time("to", opts["end"]))
            written = audit_export_write(
                organization_id=org.pk,
                server_ids=[names[n] for n in opts["server"]],
                window=window,
                formats=formats,
                out_dir=out,
                time_zone=opts["time_zone"],
                operator=_operator(),
            )
        except ExportError as exc:
            raise CommandError(f"{exc.field.replace('_', ' ')}: {exc}") from None
        for f in written:
            self.stdout.write(f"{f.sha256}  {out / f.name}  ({f.size_bytes} bytes)")
