"""manage.py advise --server NAME | --all [--json] — evaluate now, then print the open recommendations."""

import json as jsonlib

from django.core.management.base import BaseCommand, CommandError

from advisor.selectors import evaluations, recommendations
from advisor.services import server_advise
from inventory.lookups import find_server
from inventory.models import Server


class Command(BaseCommand):
    help = "Evaluate the advisor's rules on a server (or every enabled one) now and print the open recommendations."

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--server", help="server name (ORG/NAME when names repeat across organizations)")
        which.add_argument("--all", action="store_true", help="every enabled server")
        parser.add_argument("--json", action="store_true", help="one JSON document with every field")

    def handle(self, *args, server=None, all=False, **opts):
        servers = list(Server.objects.filter(enabled=True).order_by("name")) if all else [find_server(server)]
        failed = []
        for s in servers:
            out = server_advise(server_id=s.pk)
            if out.error:
                failed.append(f"{s.name}: {out.error}")
        ids = [s.pk for s in servers]
        rows = recommendations(server_ids=ids)
        runs = evaluations(server_ids=ids)
        if opts["json"]:
            self.stdout.write(_json(servers, rows, runs))
        else:
            self._text(servers, rows, runs)
        if failed:
            raise CommandError("evaluation failed for " + "; ".join(failed))

    def _text(self, servers, rows, runs):
        for s in servers:
            run = runs.get(s.pk)
            mine = [r for r in rows if r.server_id == s.pk]
            self.stdout.write(f"{s.name}: {len(mine)} open recommendation(s)")
            for note in run.notes if run else []:
                self.stdout.write(f"  note: {note}")
            for r in mine:
                ack = f", acknowledged by {r.acknowledged_by}" if r.status == "acknowledged" else ""
                self.stdout.write(f"  [{r.severity}] {r.rule} {r.subject}{ack}: {r.title}")
                self.stdout.write(f"      {r.explanation}")
                if r.change_text:
                    self.stdout.write(f"      change ({r.change_apply}): {r.change_text}")


def _json(servers, rows, runs) -> str:
    doc = []
    for s in servers:
        run = runs.get(s.pk)
        doc.append(
            {
                "server": s.name,
                "organization": s.organization.name,
                "evaluated_at": run.at.isoformat() if run else None,
                "partial": run.partial if run else None,
                "notes": run.notes if run else [],
                "error": run.error if run else "",
                "recommendations": [r.as_json() for r in rows if r.server_id == s.pk],
            }
        )
    return jsonlib.dumps(doc, indent=2)
