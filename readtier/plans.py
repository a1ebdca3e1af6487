"""A statement's plans as the history store keeps them (history/plans.py): each shape it was planned with (first and
last seen, the last estimates), its last EXPLAIN and why it gave no plan, the plan of one shape, and the times its
plan changed shape, for the statement page, its charts, the API and the regression alert alike."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from history.public import PLANNED, TABLES, PlanAttempt, PlanShape, StatementPlan
from readtier import db
from readtier.windows import Window


@dataclass(frozen=True)
class StatementPlanRow:
    shape_id: int
    fingerprint: str
    access_paths: list[str]  # "Seq Scan on orders", "Index Scan using orders_pkey on orders", ... in plan order
    node_count: int
    first_seen_at: datetime
    last_seen_at: datetime
    total_cost: float  # the last plan of this shape's estimates
    plan_rows: float
    method: str  # generic_plan (16+) or prepare (13-15)


@dataclass(frozen=True)
class LastAttempt:
    at: datetime
    code: str  # "planned", or why not (collectors/plans/explain.py's reasons, "text", "budget", ...)
    reason: str

    @property
    def planned(self) -> bool:
        return self.code == PLANNED


@dataclass(frozen=True)
class StatementPlans:
    plans: list[StatementPlanRow]  # the most recently seen first: plans[0] is the current plan
    attempt: LastAttempt | None  # None: never EXPLAINed

    @property
    def current(self) -> StatementPlanRow | None:
        return self.plans[0] if self.plans else None


@dataclass(frozen=True)
class PlanDetail:
    shape_id: int
    fingerprint: str
    plan: dict  # EXPLAIN (FORMAT JSON)'s object, its strings redacted
    access_paths: list[str]
    node_count: int
    first_seen_at: datetime


@dataclass(frozen=True)
class PlanChangeRow:
    statement_id: int
    at: datetime  # when the new shape was first seen (the EXPLAIN that found it)
    before: list[str]  # the access paths of the shape before, and after
    after: list[str]
    from_fingerprint: str
    to_fingerprint: str
    queryid: int | None = None  # the statement's (None: it is no longer in the history)

    @property
    def described(self) -> str:
        """ "the plan changed from Index Scan using orders_customer_idx on orders to Seq Scan on orders": what the
        shape before read that the one after does not, and the other way round (all of each when nothing differs
        but the joins' order or methods)."""
        gone = [p for p in self.before if p not in self.after]
        new = [p for p in self.after if p not in self.before]
        if not gone and not new:  # the same scans: the joins' order or methods changed
            return f"the plan changed its joins, reading the same ({', '.join(self.after) or 'no table'})"
        return f"the plan changed from {', '.join(gone or self.before)} to {', '.join(new or self.after)}"


def statement_plans(*, server_id: int, statement_id: int) -> StatementPlans:
    rows = list(
        StatementPlan.objects.filter(server_id=server_id, statement_id=statement_id).order_by(
            "-last_seen_at", "-first_seen_at"
        )
    )
    shapes = _shapes(server_id, {r.shape_id for r in rows})
    attempt = PlanAttempt.objects.filter(server_id=server_id, statement_id=statement_id).first()
    return StatementPlans(
        plans=[
            StatementPlanRow(
                shape_id=r.shape_id,
                fingerprint=shapes[r.shape_id].fingerprint,
                access_paths=shapes[r.shape_id].access_paths,
                node_count=shapes[r.shape_id].node_count,
                first_seen_at=r.first_seen_at,
                last_seen_at=r.last_seen_at,
                total_cost=r.total_cost,
                plan_rows=r.plan_rows,
                method=r.method,
            )
            for r in rows
            if r.shape_id in shapes
        ],
        attempt=LastAttempt(attempt.at, attempt.code, attempt.reason) if attempt else None,
    )


def plan_detail(*, server_id: int, fingerprint: str, statement_id: int | None = None) -> PlanDetail:
    """One stored plan, by its fingerprint; with `statement_id`, only a shape that statement was planned with
    (another statement's plan of the same server is not its plan). LookupError when there is none."""
    found = PlanShape.objects.filter(server_id=server_id, fingerprint=fingerprint)
    if statement_id is not None:
        planned = StatementPlan.objects.filter(server_id=server_id, statement_id=statement_id)
        found = found.filter(pk__in=planned.values("shape_id"))
    shape = found.first()
    if shape is None:
        whose = "of this statement" if statement_id is not None else "on this server"
        raise LookupError(f"no such plan {whose}")
    return PlanDetail(
        shape.pk, shape.fingerprint, shape.plan, shape.access_paths, shape.node_count, shape.first_seen_at
    )


_CHANGES_SQL = f"""
SELECT c.statement_id, c.at, f.access_paths::text, t.access_paths::text, f.fingerprint, t.fingerprint, s.queryid
FROM {TABLES.PLAN_CHANGE.name} c
LEFT JOIN {TABLES.STATEMENT.name} s ON s.server_id = c.server_id AND s.id = c.statement_id
LEFT JOIN {TABLES.PLAN_SHAPE.name} f ON f.server_id = c.server_id AND f.id = c.from_shape_id
LEFT JOIN {TABLES.PLAN_SHAPE.name} t ON t.server_id = c.server_id AND t.id = c.to_shape_id
WHERE c.server_id = %(server)s AND c.at >= %(start)s AND c.at < %(end)s
  AND (%(all)s OR c.statement_id = ANY(%(ids)s))
ORDER BY c.at, c.id
"""


def plan_changes(*, server_id: int, window: Window, statement_ids: list[int] | None = None) -> list[PlanChangeRow]:
    """The plan changes of a server's statements (or of those given) seen within the window, oldest first: one
    query, the shapes' access paths joined."""
    rows = db.fetchall(
        _CHANGES_SQL,
        {
            "server": server_id,
            "start": window.start,
            "end": window.end,
            "all": statement_ids is None,
            "ids": list(statement_ids or []),
        },
    )
    return [
        PlanChangeRow(
            statement_id=sid,
            at=at,
            before=json.loads(before) if before else [],  # as text: Django's connection leaves jsonb unparsed
            after=json.loads(after) if after else [],
            from_fingerprint=from_fp or "",
            to_fingerprint=to_fp or "",
            queryid=queryid,
        )
        for sid, at, before, after, from_fp, to_fp, queryid in rows
    ]


def plan_changes_by_statement(
    *, server_id: int, window: Window, statement_ids: list[int]
) -> dict[int, list[PlanChangeRow]]:
    """The plan changes of the given statements within the window, by statement id, each oldest first (the last
    is the likeliest cause of a regression); no query for no statement."""
    out: dict[int, list[PlanChangeRow]] = {}
    if statement_ids:
        for change in plan_changes(server_id=server_id, window=window, statement_ids=statement_ids):
            out.setdefault(change.statement_id, []).append(change)
    return out


def _shapes(server_id: int, ids: set[int]) -> dict[int, PlanShape]:
    if not ids:
        return {}
    return {s.pk: s for s in PlanShape.objects.filter(server_id=server_id, pk__in=ids).defer("plan")}


def statements_using(*, server_id: int, index_names: set[str]) -> dict[str, list[int]]:
    """Per index name, the statements whose current plan (their last seen) reads that index."""
    latest: dict[int, StatementPlan] = {}
    for row in StatementPlan.objects.filter(server_id=server_id).order_by("statement_id", "-last_seen_at"):
        latest.setdefault(row.statement_id, row)
    shapes = _shapes(server_id, {r.shape_id for r in latest.values()})
    found: dict[str, list[int]] = {name: [] for name in index_names}
    for statement_id, row in sorted(latest.items()):
        shape = shapes.get(row.shape_id)
        if shape is None:
            continue
        for path in shape.access_paths:
            for name in index_names:
                if f" using {name} on " in path or path.endswith(f" on {name}"):
                    found[name].append(statement_id)
    return {name: sorted(set(ids)) for name, ids in found.items()}
