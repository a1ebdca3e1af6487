"""manage.py plan --server NAME --queryid Q — the generic plan of a statement now, as its role would have it planned.

Reads the statement's text again from pg_stat_statements, EXPLAINs it on its server without running it (read-only,
under PLANS_STATEMENT_TIMEOUT_MS and PLANS_LOCK_TIMEOUT_MS) and stores the plan with the statement's others; a
statement that cannot be explained gets its reason. One queryid can be several statements (one per role, database
and level): each is planned.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from collectors.plans.service import statement_plan
from collectors.plans.shape import tree_lines
from history.public import PlanShape, Statement
from inventory.lookups import find_server


class Command(BaseCommand):
    help = "EXPLAIN a statement of a server now (its generic plan, never run) and store its plan."

    def add_arguments(self, parser):
        parser.add_argument("--server", required=True, help="server name (ORG/NAME when names repeat)")
        parser.add_argument("--queryid", required=True, type=int, help="the statement's queryid")
        parser.add_argument("--json", action="store_true", dest="as_json", help="the stored plans as JSON")

    def handle(self, *args, server, queryid, as_json: bool, **opts):
        found = find_server(server)
        statements = list(Statement.objects.filter(server=found, queryid=queryid).order_by("dbid", "userid", "id"))
        if not statements:
            raise CommandError(f"{found.name} has no statement with queryid {queryid} in its history")
        out, failed = [], 0
        for statement in statements:
            outcome = statement_plan(server_id=found.pk, statement_id=statement.pk)
            who = f"queryid {queryid}, database {statement.database_name or statement.dbid}, role "
            who += statement.user_name or str(statement.userid)
            plan = None
            if outcome.planned:
                plan = PlanShape.objects.get(server_id=found.pk, id=outcome.shape_id).plan
            else:
                failed += 1
            out.append((who, outcome, plan))
        if as_json:
            self.stdout.write(
                json.dumps(
                    [
                        {"statement": who, "planned": o.planned, "code": o.code, "reason": o.reason, "plan": p}
                        for who, o, p in out
                    ],
                    indent=2,
                )
            )
        else:
            for who, outcome, plan in out:
                if plan is None:
                    self.stdout.write(f"{who}: no plan: {outcome.reason}")
                    continue
                self.stdout.write(f"{who}: planned")
                for line in tree_lines(plan):
                    self.stdout.write(f"  {line}")
        if failed == len(out):
            raise CommandError("no plan could be read")
