"""Plans as EXPLAIN (FORMAT JSON) writes them, built by hand for the pages' tests, stored through the real writer
(history.plans.record_plan)."""

from __future__ import annotations

from datetime import datetime

from collectors.plans import shape
from collectors.redact import redact
from history import plans
from history.models import Statement
from inventory.models import Organization, Server


def node(kind: str, total: float, rows: float, *children: dict, **more) -> dict:
    return {
        "Node Type": kind,
        "Startup Cost": 0.0,
        "Total Cost": total,
        "Plan Rows": rows,
        "Plan Width": 8,
        "Plans": list(children),
        **more,
    }


def store(server_id: int, statement_id: int, plan: dict, at: datetime) -> str:
    """The plan stored as the plans reading stores one (its shape's fingerprint and access paths as it computes
    them): the fingerprint."""
    new = plans.NewPlan(
        plan=plan,
        fingerprint=shape.fingerprint(plan),
        access_paths=shape.access_paths(plan),
        node_count=shape.node_count(plan),
        method="generic_plan",
    )
    plans.record_plan(server_id, statement_id, new, at=at, redact=redact)
    return new.fingerprint


def report_plan(*, indexed: bool) -> dict:
    """A report's plan: its orders found by an index on customer, or by a sequential scan once the index is gone."""
    if indexed:
        orders = node(
            "Index Scan",
            380.0,
            420,
            **{
                "Relation Name": "orders",
                "Alias": "o",
                "Index Name": "orders_customer_idx",
                "Index Cond": "(customer = $1)",
                "Filter": "(status = ANY ($2))",
            },
        )
    else:
        orders = node(
            "Seq Scan",
            18250.0,
            420,
            **{"Relation Name": "orders", "Alias": "o", "Filter": "((customer = $1) AND (status = ANY ($2)))"},
        )
    cost = orders["Total Cost"]
    customers = node("Seq Scan", 22.0, 1000, **{"Relation Name": "customers", "Alias": "c"})
    hashed = node("Hash", 22.0, 1000, customers)
    join = node(
        "Hash Join", cost + 30.0, 420, orders, hashed, **{"Join Type": "Inner", "Hash Cond": "(o.customer = c.id)"}
    )
    grouped = node("Aggregate", cost + 36.0, 12, join, Strategy="Hashed", **{"Group Key": ["c.region"]})
    return {"Plan": node("Sort", cost + 37.0, 12, grouped, **{"Sort Key": ["(sum(o.amount)) DESC"]})}


def one_node_plan(node: str, cost: float, rows: float, filter_: str = "(customer = $1)") -> plans.NewPlan:
    """A plan of one scan of orders, its shape named after its node type (two plans of one node type: one shape)."""
    plan = {
        "Plan": {"Node Type": node, "Relation Name": "orders", "Total Cost": cost, "Plan Rows": rows, "Filter": filter_}
    }
    return plans.NewPlan(
        plan=plan,
        fingerprint=node.replace(" ", "").ljust(32, "0")[:32],
        access_paths=[f"{node} on orders"],
        node_count=1,
        method="generic_plan",
    )


def a_statement(at: datetime) -> Statement:
    """A statement of a server of its own organization, first seen at `at`."""
    org = Organization.objects.create(name="plans")
    server = Server.objects.create(organization=org, name="p1", host="db1", database="app", user="m")
    return Statement.objects.create(server=server, userid=10, dbid=5, queryid=42, first_seen_at=at)
