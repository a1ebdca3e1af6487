"""The history store's plans: each shape once per server, each statement's plans by shape, its last EXPLAIN.

A plan is stored once per shape (content-addressed by its fingerprint, collectors/plans/shape.py): planned again
with the same shape, a statement only moves its last-seen time and estimates. Strings of a plan (its conditions,
its output) are redacted as query texts are, before they are stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.db.models import F

from history.models import IndexCandidate, PlanAttempt, PlanChange, PlanShape, PlanSpend, StatementPlan
from history.tables import TABLES

PLANNED = "planned"
BUDGET = "budget"  # the attempt's code when the server's budget refused it (tried again once there is budget)
SERVER = "server"  # the attempt's code when the server itself could not be read (tried again at the next round)
NOT_ATTEMPTS = (BUDGET, SERVER)  # what a statement's dueness does not count as an attempt


@dataclass(frozen=True)
class NewPlan:
    plan: dict  # EXPLAIN (FORMAT JSON)'s object, not redacted yet
    fingerprint: str
    access_paths: list[str]
    node_count: int
    method: str


def redacted(value, redact: Callable[[str], str]):
    """A plan with every string in it redacted by `redact` (its keys are EXPLAIN's own names)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redacted(v, redact) for v in value]
    if isinstance(value, dict):
        return {k: redacted(v, redact) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Stored:
    shape_id: int
    new_bytes: int  # the plan's bytes when its shape was new to the server, else 0


def record_plan(
    server_id: int, statement_id: int, new: NewPlan, *, at: datetime, redact: Callable[[str], str]
) -> Stored:
    """Store a statement's plan: its shape once (its strings redacted by `redact`, the collectors' redaction), the
    statement's row for that shape, its last attempt."""
    top = new.plan["Plan"]
    last = {"last_seen_at": at, "total_cost": top["Total Cost"], "plan_rows": top["Plan Rows"], "method": new.method}
    with transaction.atomic():
        previous = (
            StatementPlan.objects.filter(server_id=server_id, statement_id=statement_id)
            .order_by("-last_seen_at")
            .values_list("shape_id", flat=True)
            .first()
        )
        shape, created = PlanShape.objects.get_or_create(
            server_id=server_id,
            fingerprint=new.fingerprint,
            defaults={
                "plan": redacted(new.plan, redact),
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
        if previous is not None and previous != shape.pk:
            PlanChange.objects.create(
                server_id=server_id, statement_id=statement_id, at=at, from_shape_id=previous, to_shape_id=shape.pk
            )
        _attempt(server_id, statement_id, at, PLANNED, "")
    return Stored(shape.pk, len(json.dumps(shape.plan)) if created else 0)


def record_unexplained(server_id: int, statement_id: int, *, code: str, reason: str, at: datetime) -> None:
    """A statement's EXPLAIN that gave no plan, and why (its earlier plans stay)."""
    _attempt(server_id, statement_id, at, code, reason)


def _attempt(server_id: int, statement_id: int, at: datetime, code: str, reason: str) -> None:
    PlanAttempt.objects.update_or_create(
        server_id=server_id, statement_id=statement_id, defaults={"at": at, "code": code, "reason": reason}
    )


@dataclass(frozen=True)
class PlanBudget:
    """What a server's plans may cost (settings.PLANS): EXPLAINs and milliseconds of planning on the server per UTC
    hour, bytes of new shapes stored per UTC day."""

    explains_per_hour: int
    planning_ms_per_hour: float
    bytes_per_day: int
    least_ms: float = 50.0  # less left in the hour than this: no EXPLAIN could finish in it


@dataclass(frozen=True)
class Grant:
    """One EXPLAIN's share of the hour: it may take `timeout_ms` on the server (its statement_timeout)."""

    hour: datetime
    timeout_ms: int


@dataclass(frozen=True)
class PlanRefused:
    reason: str


def _hour(at: datetime) -> datetime:
    """The UTC hour `at` falls in (a zone half an hour off UTC would floor to another hour)."""
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def budget_reserve(server_id: int, budget: PlanBudget, *, at: datetime, want_ms: int) -> Grant | PlanRefused:
    """Take one EXPLAIN and up to `want_ms` of planning from the server's hour, or say why the budget refuses it.
    The row is locked while it is read and written, so that two EXPLAINs of one server never share the same rest
    of the hour; budget_settle gives back what the EXPLAIN did not use."""
    hour = _hour(at)
    next_hour = f"{hour + timedelta(hours=1):%H:%M} UTC"
    with transaction.atomic():
        spend, _ = PlanSpend.objects.select_for_update().get_or_create(server_id=server_id, hour=hour)
        if spend.explains >= budget.explains_per_hour:
            return PlanRefused(
                f"the server's plan budget is spent: {spend.explains} EXPLAINs this hour, of "
                f"{budget.explains_per_hour} (PLANS_EXPLAINS_PER_HOUR); more from {next_hour}"
            )
        day = hour.replace(hour=0)
        stored = sum(
            PlanSpend.objects.filter(server_id=server_id, hour__gte=day, hour__lt=day + timedelta(days=1)).values_list(
                "bytes", flat=True
            )
        )
        if stored >= budget.bytes_per_day:
            return PlanRefused(
                f"the server's plan budget is spent: {stored:,} bytes of new plans stored today, of "
                f"{budget.bytes_per_day:,} (PLANS_BYTES_PER_DAY); more from 00:00 UTC"
            )
        left = budget.planning_ms_per_hour - spend.planning_ms
        if left < budget.least_ms:
            return PlanRefused(
                f"the server's plan budget is spent: {spend.planning_ms / 1000:.2f} s of planning this hour, of "
                f"{budget.planning_ms_per_hour / 1000:.2f} s (PLANS_PLANNING_S_PER_HOUR); more from {next_hour}"
            )
        granted = int(min(want_ms, left))
        spend.explains += 1
        spend.planning_ms += granted
        spend.save(update_fields=["explains", "planning_ms"])
    return Grant(hour, granted)


def budget_settle(server_id: int, grant: Grant, *, used_ms: float, new_bytes: int) -> None:
    """The EXPLAIN's real cost in place of its grant: the time it took (measured, so possibly a little over its
    timeout: the next grant sees it) and the bytes it stored."""
    PlanSpend.objects.filter(server_id=server_id, hour=grant.hour).update(
        planning_ms=F("planning_ms") - grant.timeout_ms + used_ms, bytes=F("bytes") + new_bytes
    )


def spend_prune(before: datetime) -> int:
    """Forget the budget's hours before `before` (the benchmark and the budget read the last day). Rows removed."""
    return PlanSpend.objects.filter(hour__lt=before).delete()[0]


_S, _SP, _SHAPE, _TRY, _CHANGE = (
    TABLES.STATEMENT.name,
    TABLES.STATEMENT_PLAN.name,
    TABLES.PLAN_SHAPE.name,
    TABLES.PLAN_ATTEMPT.name,
    TABLES.PLAN_CHANGE.name,
)


def prune_orphans(server_id: int) -> int:
    """Remove the plans of the server's statements that are no longer in the dimension (history/prune.py), then
    the shapes no statement has any more. Rows removed."""
    removed = 0
    with connection.cursor() as cur:
        for table in (_SP, _TRY, _CHANGE):
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


def record_candidates(server_id: int, statement_id: int, database: str, found: list, *, at: datetime) -> None:
    """The index candidates of a statement's plan (collectors.plans.hypothetical.Candidate), in place of its last
    plan's."""
    with transaction.atomic():
        IndexCandidate.objects.filter(server_id=server_id, statement_id=statement_id).delete()
        IndexCandidate.objects.bulk_create(
            IndexCandidate(
                server_id=server_id,
                statement_id=statement_id,
                at=at,
                database=database,
                schema_name=c.schema,
                table_name=c.table,
                columns=list(c.columns) if c.advised else [],
                method=c.method,
                reltuples=c.reltuples,
                selectivity=c.selectivity,
                cost_before=c.cost_before,
                cost_after=c.cost_after if c.advised else None,
                size_bytes=c.size_bytes if c.advised else None,
                reason=c.reason if c.advised else (c.reason or "its cost is not lower with the index"),
                partition_of=c.partition_of,
            )
            for c in found
        )
