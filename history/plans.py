"""The history store's plans: each shape once per server, each statement's plans by shape, its last EXPLAIN.

A plan is stored once per shape (content-addressed by its fingerprint, readings/plans/shape.py): planned again
with the same shape, a statement only moves its last-seen time and estimates. Strings of a plan (its conditions,
its output) are redacted as query texts are, before they are stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from history import tables
from history.models import PlanAttempt, PlanShape, StatementPlan
from history.redact import redact

PLANNED = "planned"


@dataclass(frozen=True)
class NewPlan:
    plan: dict  # EXPLAIN (FORMAT JSON)'s object, not redacted yet
    fingerprint: str
    access_paths: list[str]
    node_count: int
    method: str


def redacted(value, *, strict: bool = False):
    """A plan with every string in it redacted (its keys are EXPLAIN's own names)."""
    if isinstance(value, str):
        return redact(value, strict=strict)
    if isinstance(value, list):
        return [redacted(v, strict=strict) for v in value]
    if isinstance(value, dict):
        return {k: redacted(v, strict=strict) for k, v in value.items()}
    return value


def record_plan(server_id: int, statement_id: int, new: NewPlan, *, at: datetime, strict: bool = False) -> int:
    """Store a statement's plan: its shape once, the statement's row for that shape, its last attempt. The shape's
    id."""
    top = new.plan["Plan"]
    last = {"last_seen_at": at, "total_cost": top["Total Cost"], "plan_rows": top["Plan Rows"], "method": new.method}
    with transaction.atomic():
        shape, _ = PlanShape.objects.get_or_create(
            server_id=server_id,
            fingerprint=new.fingerprint,
            defaults={
                "plan": redacted(new.plan, strict=strict),
                "access_paths": new.access_paths,
                "node_count": new.node_count,
                "first_seen_at": at,
            },
        )
        StatementPlan.objects.update_or_create(
            server_id=server_id,
            statement_id=statement_id,
            shape_id=shape.pk,
            defaults=last,
            create_defaults={"first_seen_at": at, **last},
        )
        _attempt(server_id, statement_id, at, PLANNED, "")
    return shape.pk


def record_unexplained(server_id: int, statement_id: int, *, code: str, reason: str, at: datetime) -> None:
    """A statement's EXPLAIN that gave no plan, and why (its earlier plans stay)."""
    _attempt(server_id, statement_id, at, code, reason)


def _attempt(server_id: int, statement_id: int, at: datetime, code: str, reason: str) -> None:
    PlanAttempt.objects.update_or_create(
        server_id=server_id, statement_id=statement_id, defaults={"at": at, "code": code, "reason": reason}
    )


_S, _SP, _SHAPE, _TRY = (
    tables.STATEMENT.name,
    tables.STATEMENT_PLAN.name,
    tables.PLAN_SHAPE.name,
    tables.PLAN_ATTEMPT.name,
)


def prune_orphans(server_id: int) -> int:
    """Remove the plans of the server's statements that are no longer in the dimension (history/prune.py), then
    the shapes no statement has any more. Rows removed."""
    removed = 0
    with connection.cursor() as cur:
        for table in (_SP, _TRY):
            cur.execute(
                f"DELETE FROM {table} p WHERE p.server_id = %s "
                f"AND NOT EXISTS (SELECT FROM {_S} s WHERE s.server_id = p.server_id AND s.id = p.statement_id)",
                [server_id],
            )
            removed += cur.rowcount
        cur.execute(
            f"DELETE FROM {_SHAPE} h WHERE h.server_id = %s "
            f"AND NOT EXISTS (SELECT FROM {_SP} p WHERE p.server_id = h.server_id AND p.shape_id = h.id)",
            [server_id],
        )
        removed += cur.rowcount
    return removed
