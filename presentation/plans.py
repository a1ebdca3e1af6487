"""A stored plan (EXPLAIN (FORMAT JSON)'s object) as people read it: its nodes in plan order with what each reads,
its conditions, its estimates and its own share of the cost, and the same plan in EXPLAIN's text format. Pure: the
statement page, the API and the downloads render from here. One pass over the nodes, iterative (a plan's depth is
the server's to decide)."""

from __future__ import annotations

from dataclasses import dataclass

# The conditions and keys EXPLAIN prints under a node, in its order; each is a string or a list of strings.
CONDITIONS = (
    "Hash Cond",
    "Merge Cond",
    "Index Cond",
    "Recheck Cond",
    "TID Cond",
    "Join Filter",
    "Filter",
    "One-Time Filter",
    "Sort Key",
    "Presorted Key",
    "Group Key",
    "Cache Key",
)
COSTLIEST = 3  # the nodes marked: the three whose own estimated cost is the highest ...
MARKED_SHARE = 0.1  # ... of those adding at least a tenth of the plan's cost (a node adding 0.1% is no culprit)
_AGGREGATES = {"Hashed": "HashAggregate", "Sorted": "GroupAggregate", "Mixed": "MixedAggregate"}


@dataclass(frozen=True)
class PlanNode:
    depth: int  # 0 for the top node
    label: str  # as EXPLAIN's text names it: "Hash Left Join", "Index Scan using orders_pkey on orders o"
    node_type: str
    relation: str  # "orders", "orders o" (with its alias), or ""
    index: str
    join_type: str  # Inner, Left, Semi, ... or ""
    conditions: tuple[tuple[str, str], ...]  # ("Filter", "(status = $1)"), ... in EXPLAIN's order
    startup_cost: float
    total_cost: float
    plan_rows: float
    width: int  # estimated bytes per row
    own_cost: float  # its total cost less its children's: what the node adds (never below 0)
    share: float  # its own cost's share of the top node's total cost, 0 to 1
    costliest: bool  # among the COSTLIEST nodes by own cost, of those adding MARKED_SHARE of the cost or more


def _relation(node: dict) -> str:
    name = node.get("Relation Name") or node.get("CTE Name") or node.get("Function Name") or ""
    alias = node.get("Alias", "")
    return f"{name} {alias}" if name and alias and alias != name else name or alias


def _label(node: dict) -> str:
    kind = node.get("Node Type", "?")
    join = node.get("Join Type", "")
    if kind == "Aggregate":
        kind = _AGGREGATES.get(node.get("Strategy", ""), kind)
    elif join and join != "Inner":
        kind = f"{kind[: -len(' Join')]} {join} Join" if kind.endswith(" Join") else f"{kind} {join} Join"
    if node.get("Scan Direction") == "Backward":
        kind += " Backward"
    if kind == "Bitmap Index Scan":  # it reads the index alone, and EXPLAIN says so
        return f"{kind} on {node.get('Index Name', '?')}"
    if node.get("Index Name"):
        kind += f" using {node['Index Name']}"
    relation = _relation(node)
    return f"{kind} on {relation}" if relation else kind


def _conditions(node: dict) -> tuple[tuple[str, str], ...]:
    out = []
    for key in CONDITIONS:
        value = node.get(key)
        if value:
            out.append((key, ", ".join(map(str, value)) if isinstance(value, list) else str(value)))
    return tuple(out)


@dataclass(frozen=True)
class _Placed:
    node: dict
    depth: int
    column: int  # where EXPLAIN's text starts the node's name ("->" two columns before it... and then four)


def _walk(plan: dict) -> list[_Placed]:
    """Every node in plan order (a node before its children, children in order), with its depth and its column in
    EXPLAIN's text: a child's "->" two columns right of its parent's name, or four under an InitPlan, SubPlan or CTE
    line, which itself stands two columns right of it."""
    out, stack = [], [(plan["Plan"], 0, 0)]
    while stack:
        node, depth, column = stack.pop()
        out.append(_Placed(node, depth, column))
        for child in reversed(node.get("Plans", [])):
            arrow = column + (4 if child.get("Subplan Name") else 2)
            stack.append((child, depth + 1, arrow + 4))
    return out


def plan_nodes(plan: dict) -> list[PlanNode]:
    """Every node in plan order, with its own cost (its total less its children's: a parent's total includes
    theirs) and that cost's share of the top node's total. Marked costliest: the COSTLIEST nodes adding the most,
    where to look first; of those adding MARKED_SHARE of the cost or more, since in a plan whose cost is one scan a
    node adding 0.1% is no culprit, and three marks or fewer keep the eye on the few that matter."""
    walked = _walk(plan)
    top = float(walked[0].node.get("Total Cost", 0.0)) if walked else 0.0
    own = [
        max(0.0, float(p.node.get("Total Cost", 0.0)) - sum(float(c.get("Total Cost", 0.0)) for c in _children(p)))
        for p in walked
    ]
    heavy = (i for i, cost in enumerate(own) if top > 0 and cost / top >= MARKED_SHARE)
    marked = set(sorted(heavy, key=lambda i: -own[i])[:COSTLIEST])
    return [
        PlanNode(
            depth=depth,
            label=_label(node),
            node_type=node.get("Node Type", "?"),
            relation=_relation(node),
            index=node.get("Index Name", ""),
            join_type=node.get("Join Type", ""),
            conditions=_conditions(node),
            startup_cost=float(node.get("Startup Cost", 0.0)),
            total_cost=float(node.get("Total Cost", 0.0)),
            plan_rows=float(node.get("Plan Rows", 0.0)),
            width=int(node.get("Plan Width", 0)),
            own_cost=own[i],
            share=own[i] / top if top > 0 else 0.0,
            costliest=i in marked,
        )
        for i, (node, depth) in enumerate((p.node, p.depth) for p in walked)
    ]


def _children(p: _Placed) -> list[dict]:
    return p.node.get("Plans", [])


def plan_text(plan: dict) -> str:
    """The plan as EXPLAIN's text format prints it (without JIT's lines): a line per node with its estimates, "->"
    before a child, an InitPlan, SubPlan or CTE named above its node, and each node's conditions under it."""
    lines = []
    for p, n in zip(_walk(plan), plan_nodes(plan), strict=True):
        if p.depth == 0:
            arrow = ""
        else:
            if p.node.get("Subplan Name"):
                lines.append(" " * (p.column - 6) + p.node["Subplan Name"])
            arrow = " " * (p.column - 4) + "->  "
        estimates = f"cost={n.startup_cost:.2f}..{n.total_cost:.2f} rows={n.plan_rows:.0f} width={n.width}"
        lines.append(f"{arrow}{n.label}  ({estimates})")
        lines += [f"{' ' * (p.column + 2)}{label}: {text}" for label, text in n.conditions]
    return "\n".join(lines) + "\n"
