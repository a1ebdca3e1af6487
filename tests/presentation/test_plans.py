"""presentation/plans.py: a stored plan read back as PostgreSQL's own EXPLAIN text prints it (compared line for line
with the server's, on 13 and 18, for joins, aggregates, InitPlans, SubPlans, CTEs, appends and bitmap scans), and
its nodes' own costs, shares and the costliest marked, computed from the plan's estimates; deep and wide plans in
one pass."""

import psycopg
import pytest

from presentation.plans import COSTLIEST, plan_nodes, plan_text
from tests.conftest import APP_DB

SCHEMA = (
    "DROP TABLE IF EXISTS pt_orders, pt_customers; "
    "CREATE TABLE pt_customers (id int PRIMARY KEY, name text); "
    "CREATE TABLE pt_orders (id int, customer int, status text); "
    "INSERT INTO pt_customers SELECT g, 'n' || g FROM generate_series(1, 1000) g; "
    "INSERT INTO pt_orders SELECT g, g % 1000 + 1, 'x' FROM generate_series(1, 20000) g; "
    "CREATE INDEX pt_orders_customer ON pt_orders (customer); ANALYZE pt_orders; ANALYZE pt_customers"
)
QUERIES = (
    "SELECT c.name, count(*) FROM pt_orders o JOIN pt_customers c ON c.id = o.customer "
    "LEFT JOIN pt_orders o2 ON o2.id = o.id WHERE o.status = 'y' AND c.id > 5 GROUP BY c.name ORDER BY 2 DESC LIMIT 10",
    "SELECT id FROM pt_orders o WHERE customer = (SELECT max(id) FROM pt_customers) "
    "OR EXISTS (SELECT 1 FROM pt_customers c WHERE c.name = o.status)",
    "WITH x AS MATERIALIZED (SELECT * FROM pt_orders WHERE id < 10) "
    "SELECT * FROM x JOIN pt_customers c ON c.id = x.customer ORDER BY c.name",
    "SELECT * FROM pt_orders WHERE id IN (1, 2, 3) UNION ALL SELECT * FROM pt_orders WHERE customer = 3",
    "SELECT status, count(*) FROM pt_orders GROUP BY status",
)


@pytest.mark.parametrize("major", [13, 18])
def test_the_text_is_postgresqls_own(pg_clusters, major):
    c = pg_clusters[major]
    c.execute(SCHEMA, dbname=APP_DB)
    with psycopg.connect(c.dsn(APP_DB), autocommit=True) as conn:
        conn.execute("SET jit = off")  # its lines are the run's, not the plan's
        for query in QUERIES:
            plan = conn.execute(f"EXPLAIN (FORMAT JSON) {query}").fetchone()[0][0]
            text = [row[0] for row in conn.execute(f"EXPLAIN {query}")]
            assert plan_text(plan).splitlines() == text, query


def _node(kind: str, total: float, *children: dict, **more) -> dict:
    return {
        "Node Type": kind,
        "Startup Cost": 0.0,
        "Total Cost": total,
        "Plan Rows": 10,
        "Plans": list(children),
        **more,
    }


def test_own_costs_shares_and_the_costliest_come_from_the_estimates():
    scan = _node("Seq Scan", 400.0, **{"Relation Name": "orders", "Alias": "o", "Filter": "(status = $1)"})
    probe = _node("Index Scan", 8.0, **{"Relation Name": "customers", "Index Name": "customers_pkey"})
    hashed = _node("Hash", 400.0, scan)
    join = _node("Hash Join", 450.0, probe, hashed, **{"Join Type": "Left", "Hash Cond": "(o.customer = c.id)"})
    top = _node("Aggregate", 500.0, join, Strategy="Hashed", **{"Group Key": ["c.name", "o.status"]})
    nodes = plan_nodes({"Plan": top})
    assert [n.label for n in nodes] == [
        "HashAggregate",
        "Hash Left Join",
        "Index Scan using customers_pkey on customers",
        "Hash",
        "Seq Scan on orders o",
    ]
    assert [n.depth for n in nodes] == [0, 1, 2, 2, 3]
    own = {"HashAggregate": 50.0, "Hash Left Join": 42.0, "Index Scan": 8.0, "Hash": 0.0, "Seq Scan": 400.0}
    assert [n.own_cost for n in nodes] == [own[n.label.split(" using")[0].split(" on")[0]] for n in nodes]
    assert [n.share for n in nodes] == [n.own_cost / 500.0 for n in nodes]
    # Marked: the nodes adding a tenth of the cost or more (the join's 8.4% is not), at most three.
    assert [n.label for n in nodes if n.costliest] == ["HashAggregate", "Seq Scan on orders o"]
    assert nodes[0].conditions == (("Group Key", "c.name, o.status"),) and nodes[4].conditions == (
        ("Filter", "(status = $1)"),
    )


def test_a_plan_of_200_nodes_and_one_5000_deep_are_read_in_one_pass():
    wide = _node("Append", 200.0, *(_node("Seq Scan", 1.0 + i % 7, **{"Relation Name": f"t{i}"}) for i in range(199)))
    nodes = plan_nodes({"Plan": wide})
    assert len(nodes) == 200 and not any(n.costliest for n in nodes)  # none adds a tenth of the cost
    assert len(plan_text({"Plan": wide}).splitlines()) == 200
    deep = _node("Seq Scan", 1.0)
    for level in range(4999):
        deep = _node("Materialize", 2.0 + level, deep)
    assert [n.depth for n in plan_nodes({"Plan": deep})] == list(range(5000))


def test_no_more_than_three_are_marked_the_costliest_first():
    five = _node("Append", 100.0, *(_node("Seq Scan", 20.0 - i, **{"Relation Name": f"t{i}"}) for i in range(5)))
    marked = [n.label for n in plan_nodes({"Plan": five}) if n.costliest]
    assert len(marked) == COSTLIEST and marked == ["Seq Scan on t0", "Seq Scan on t1", "Seq Scan on t2"]
