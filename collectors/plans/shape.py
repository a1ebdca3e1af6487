"""A plan's shape: what makes two plans of a statement the same plan, and how a DBA names one.

The shape is the tree of node types with their relations, indexes, join types and methods, in order; costs, row
estimates, widths and conditions are left out, so that a statement planned again with other estimates keeps its
fingerprint, and a plan change (an index scan become a sequential scan, another join order) changes it.
"""

from __future__ import annotations

import hashlib
import json

# What of a node (EXPLAIN (FORMAT JSON)'s keys) is part of its shape.
SHAPE_KEYS = (
    "Node Type",
    "Strategy",
    "Partial Mode",
    "Operation",
    "Parent Relationship",
    "Join Type",
    "Relation Name",
    "Schema",
    "Alias",
    "Index Name",
    "CTE Name",
    "Function Name",
    "Subplan Name",
    "Scan Direction",
)


def _shape(node: dict) -> list:
    own = [[key, node[key]] for key in SHAPE_KEYS if key in node]
    return [own, [_shape(child) for child in node.get("Plans", ())]]


def fingerprint(plan: dict) -> str:
    """32 hex digits that name the plan's shape (plan: EXPLAIN (FORMAT JSON)'s object, with its "Plan")."""
    canonical = json.dumps(_shape(plan["Plan"]), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _nodes(node: dict, depth: int = 0):
    """Every node of the plan in EXPLAIN's order, with its depth."""
    yield node, depth
    for child in node.get("Plans", ()):
        yield from _nodes(child, depth + 1)


def _reads(node: dict) -> str | None:
    """What a node reads, as EXPLAIN's text names it ("Index Scan using orders_customer_idx on orders",
    "Bitmap Index Scan on orders_customer_idx"), or None for a node that reads no relation or index."""
    kind, relation, index = node["Node Type"], node.get("Relation Name"), node.get("Index Name")
    if relation is not None:
        return f"{kind} using {index} on {relation}" if index else f"{kind} on {relation}"
    return f"{kind} on {index}" if index is not None else None


def access_paths(plan: dict) -> list[str]:
    """How the plan reads each relation and index, in plan order, as EXPLAIN's text says it: "Seq Scan on orders",
    "Index Scan using orders_customer_idx on orders", "Bitmap Index Scan on orders_customer_idx"."""
    return [path for node, _ in _nodes(plan["Plan"]) if (path := _reads(node)) is not None]


def node_count(plan: dict) -> int:
    return sum(1 for _ in _nodes(plan["Plan"]))


def tree_lines(plan: dict) -> list[str]:
    """The plan as an indented tree, a line per node as EXPLAIN's text starts it: its kind, what it reads, and its
    estimated total cost and rows."""
    out = []
    for node, depth in _nodes(plan["Plan"]):
        what = _reads(node) or node["Node Type"]
        if node.get("Join Type"):  # joins: Nested Loop, Hash Join, Merge Join
            what = f"{what} ({node['Join Type']})"
        arrow = "" if depth == 0 else "  " * (depth - 1) + "-> "
        out.append(f"{arrow}{what}  (cost {node.get('Total Cost', 0):.2f}, rows {node.get('Plan Rows', 0):,.0f})")
    return out
