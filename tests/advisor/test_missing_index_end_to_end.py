"""The missing-index rule end to end on a real PostgreSQL 15 with hypopg: a workload's selective statement, planned
by the plans reading, gets one recommendation whose DDL runs; its unselective neighbour gets none and its reason is
kept; once the index is made and the statement planned again, nothing is asked and the advice resolves."""

from datetime import timedelta

import pytest
from django.utils import timezone

from advisor.selectors import recommendations
from advisor.services import server_advise
from collectors.plans.service import statement_plan
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


PARTITIONED = "SELECT * FROM mp_orders WHERE customer = $1"


def test_a_partitioned_tables_index_is_one_recommendation_made_on_every_partition(pg_clusters, settings):
    """On 13 without hypopg (estimated): a table partitioned on two levels, its scans of three partitions one
    index of the partitioned table; the printed statements, run one by one as psql does, leave its index valid
    and the planner reads each partition through its own."""
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}
    c = pg_clusters[13]
    c.execute(
        "DROP TABLE IF EXISTS mp_orders; "
        "CREATE TABLE mp_orders (id int, region int, customer int, note text) PARTITION BY LIST (region); "
        "CREATE TABLE mp_orders_1 PARTITION OF mp_orders FOR VALUES IN (1); "
        "CREATE TABLE mp_orders_2 PARTITION OF mp_orders FOR VALUES IN (2) PARTITION BY RANGE (id); "
        "CREATE TABLE mp_orders_2a PARTITION OF mp_orders_2 FOR VALUES FROM (MINVALUE) TO (40000); "
        "CREATE TABLE mp_orders_2b PARTITION OF mp_orders_2 FOR VALUES FROM (40000) TO (MAXVALUE); "
        "INSERT INTO mp_orders SELECT g, g % 2 + 1, g % 3000, 'n' FROM generate_series(1, 90000) g; "
        "ANALYZE mp_orders; GRANT SELECT ON mp_orders, mp_orders_1, mp_orders_2, mp_orders_2a, mp_orders_2b "
        "TO monitor",
        dbname="app",
    )
    server = register(c)
    collect(server)
    run(c, PARTITIONED.replace("$1", "%s"), 400, params=(7,))
    collect(server)
    statement_id = server.statements.get(queryid=server_entry(c, "SELECT * FROM mp_orders WHERE%")["queryid"]).pk
    assert statement_plan(server_id=server.pk, statement_id=statement_id).planned
    asked = index_candidates(server_id=server.pk, statement_id=statement_id)
    assert sorted(a.table_name for a in asked) == ["mp_orders_1", "mp_orders_2a", "mp_orders_2b"]
    assert all(a.columns == ["customer"] and a.partition_of["table"] == "mp_orders" for a in asked)

    server_advise(server_id=server.pk)
    (rec,) = _advice(server)
    assert rec.subject == "index:app/public.mp_orders(customer)"
    assert rec.title.startswith("Index on mp_orders (customer) would save about")
    assert "the plans read 3 of its 3 partitions" in rec.explanation and "estimated from pg_stats" in rec.explanation
    statements = [line for line in rec.change_text.splitlines() if not line.startswith("--")]
    assert statements[0] == "CREATE INDEX mp_orders_customer_idx ON ONLY public.mp_orders (customer);"
    assert "CREATE INDEX CONCURRENTLY mp_orders_2a_customer_idx ON public.mp_orders_2a (customer);" in statements
    for statement in statements:  # one by one, as psql sends them: CONCURRENTLY runs outside a transaction block
        c.execute(statement, dbname="app")
    try:
        valid = c.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'mp_orders_customer_idx'::regclass", dbname="app"
        )
        assert valid == [(True,)]  # every partition's index attached
        shown = "\n".join(r[0] for r in c.execute("EXPLAIN SELECT * FROM mp_orders WHERE customer = 7", dbname="app"))
        assert shown.count("mp_orders_2b_customer_idx") == 1 and "Seq Scan" not in shown, shown
    finally:
        c.execute("DROP TABLE mp_orders", dbname="app")
