"""The missing-index rule end to end on a real PostgreSQL 15 with hypopg: a workload's selective statement, planned
by the plans reading, gets one recommendation whose DDL runs; its unselective neighbour gets none and its reason is
kept; once the index is made and the statement planned again, nothing is asked and the advice resolves."""

from datetime import timedelta

import pytest
from django.utils import timezone

from advisor.selectors import recommendations
from advisor.services import server_advise
from readings.plans.service import statement_plan
from readtier import index_candidates
from tests.world import collect, register, run, server_entry

pytestmark = pytest.mark.django_db(transaction=True)
SELECTIVE = "SELECT * FROM mi_orders WHERE customer = $1 AND status = $2"
UNSELECTIVE = "SELECT count(*) FROM mi_orders WHERE status = $1"


def _advice(server):
    return [r for r in recommendations(server_ids=[server.pk]) if r.rule == "missing_index"]


def test_a_selective_filter_gets_its_index_an_unselective_one_says_why_and_the_made_index_is_followed(
    pg_clusters, settings
):
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}  # the schema read at every collection
    c = pg_clusters[15]
    c.execute(
        "DROP TABLE IF EXISTS mi_orders; "
        "CREATE TABLE mi_orders (id int PRIMARY KEY, customer int, status text, note text); "
        "INSERT INTO mi_orders SELECT g, g % 2000, (ARRAY['new','paid','sent'])[g % 3 + 1], 'n' "
        "FROM generate_series(1, 60000) g; ANALYZE mi_orders; GRANT SELECT ON mi_orders TO monitor",
        dbname="app",
    )
    server = register(c)
    collect(server)
    # About 3 ms a call scanning the table: some 2 s in the day, over the rule's least saving worth an index (1 s).
    run(c, SELECTIVE.replace("$1", "%s").replace("$2", "%s"), 700, params=(7, "new"))
    run(c, UNSELECTIVE.replace("$1", "%s"), 20, params=("paid",))
    collect(server)
    ids = {}
    for text, like in (
        (SELECTIVE, "SELECT * FROM mi_orders WHERE customer%"),
        (UNSELECTIVE, "SELECT count(*) FROM mi_orders%"),
    ):
        ids[text] = server.statements.get(queryid=server_entry(c, like)["queryid"]).pk
        assert statement_plan(server_id=server.pk, statement_id=ids[text]).planned

    (asked,) = index_candidates(server_id=server.pk, statement_id=ids[SELECTIVE])
    assert asked.columns == ["customer", "status"] and asked.method == "cost-verified"
    (refused,) = index_candidates(server_id=server.pk, statement_id=ids[UNSELECTIVE])
    assert refused.columns == [] and "keeps about 33% of the table's" in refused.reason  # why, when asked

    server_advise(server_id=server.pk)
    (rec,) = _advice(server)
    assert rec.title.startswith("Index on mi_orders (customer, status) would save about")
    assert f"statement {ids[SELECTIVE]} " in rec.explanation and "cost-verified" in rec.explanation
    assert f"statement {ids[UNSELECTIVE]} " not in rec.explanation

    ddl = rec.change_text.split("\n", 1)[1]
    c.execute(ddl, dbname="app")  # as a DBA runs it
    c.execute("ANALYZE mi_orders", dbname="app")
    collect(server)  # the schema reading finds the index made
    run(c, SELECTIVE.replace("$1", "%s").replace("$2", "%s"), 50, params=(7, "new"))
    collect(server)
    assert statement_plan(server_id=server.pk, statement_id=ids[SELECTIVE]).planned
    assert index_candidates(server_id=server.pk, statement_id=ids[SELECTIVE]) == []  # its plan filters no scan now
    server_advise(server_id=server.pk, now=timezone.now() + timedelta(hours=3))  # past the clear time
    assert _advice(server) == []
    # The advice checks itself: the index made, and the statement's mean before it and since.
    (followed,) = [r for r in recommendations(server_ids=[server.pk]) if r.rule == "index_effect"]
    assert followed.title.startswith("Index mi_orders_customer_status_idx (made ")
    before, after = (float(x.split(" ")[0]) for x in followed.title.split("mean fell from ")[1].split(" to "))
    assert after < before / 5, followed.title
    assert f"statement {ids[SELECTIVE]} " in followed.explanation and "50 calls" in followed.explanation
    c.execute("DROP INDEX mi_orders_customer_status_idx", dbname="app")
