"""manage.py plan on a real server: a collected statement's plan printed as a tree and stored; one that cannot be
explained says why and fails the command."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from history.models import StatementPlan
from tests.world import collect, register, run, server_entry

pytestmark = pytest.mark.django_db(transaction=True)


def test_plan_prints_the_tree_and_stores_it_and_says_why_when_it_cannot(pg_clusters):
    c = pg_clusters[14]
    c.execute(
        "DROP TABLE IF EXISTS cmd_items; CREATE TABLE cmd_items (id int PRIMARY KEY, v int); "
        "INSERT INTO cmd_items SELECT g, g FROM generate_series(1, 10000) g; ANALYZE cmd_items; "
        "GRANT SELECT ON cmd_items TO monitor",
        dbname="app",
    )
    server = register(c, name="plan-cmd")
    collect(server)
    run(c, "SELECT v FROM cmd_items WHERE id = %s", 2, params=(3,))
    run(c, "VACUUM cmd_items")
    collect(server)
    select = server_entry(c, "SELECT v FROM cmd_items WHERE id%")["queryid"]

    out = io.StringIO()
    call_command("plan", server="plan-cmd", queryid=select, stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].endswith(": planned") and f"queryid {select}, database app" in lines[0]
    assert lines[1].startswith("  Index Scan using cmd_items_pkey on cmd_items  (cost ")
    assert StatementPlan.objects.filter(server_id=server.pk).count() == 1

    as_json = io.StringIO()
    call_command("plan", server="plan-cmd", queryid=select, as_json=True, stdout=as_json)
    (only,) = json.loads(as_json.getvalue())
    assert only["planned"] and only["plan"]["Plan"]["Index Name"] == "cmd_items_pkey"

    vacuum = server_entry(c, "VACUUM cmd_items%")["queryid"]
    failed = io.StringIO()
    with pytest.raises(CommandError, match="no plan could be read"):
        call_command("plan", server="plan-cmd", queryid=vacuum, stdout=failed)
    assert "no plan: a VACUUM statement" in failed.getvalue()
    with pytest.raises(CommandError, match="no statement with queryid 1 "):
        call_command("plan", server="plan-cmd", queryid=1)
