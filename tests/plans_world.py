"""Plans as EXPLAIN (FORMAT JSON) writes them, built by hand for the pages' tests, stored through the real writer
(history.plans.record_plan)."""

from __future__ import annotations

from datetime import datetime

from history import plans
from readings.plans import shape


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
    plans.record_plan(server_id, statement_id, new, at=at)
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
