"""Evaluate servers and keep the recommendations' lifecycle: open → acknowledged → resolved (by a user,
or automatically once the condition has been clear for `clear_after`), reopened when it returns."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from advisor import advice as found
from advisor.gather import server_evidence
from advisor.models import Evaluation, OrganizationThresholds, Recommendation, RecommendationEvent, Status
from advisor.rules import evaluate
from advisor.thresholds import OVERRIDES, Thresholds
from history.public import drop_history_connection
from inventory.models import Organization, Server

log = logging.getLogger(__name__)
Kind = RecommendationEvent.Kind


class LifecycleError(ValueError):
    """An action that does not apply to the recommendation's state (e.g. acknowledging a resolved one)."""


def organization_thresholds(*, organization: Organization) -> Thresholds:
    """The defaults with the organization's overrides."""
    row = OrganizationThresholds.objects.filter(organization=organization).first()
    if row is None:
        return Thresholds()
    stored = {o: getattr(row, o.field) for o in OVERRIDES}
    return replace(Thresholds(), **{o.threshold: o.value(v) for o, v in stored.items() if v is not None})


def subject_key(subject: str) -> str:
    return hashlib.sha256(subject.encode()).hexdigest()


def _evidence_json(rec: found.Advice) -> list[dict]:
    return [
        {
            "label": s.label,
            "unit": s.unit,
            "points": [[at.isoformat(), value] for at, value in s.points],
            **({"ends": [end.isoformat() for end in s.ends]} if s.ends else {}),
        }
        for s in rec.evidence
    ]


def _fields(rec: found.Advice) -> dict:
    return {
        "severity": rec.severity,
        "title": rec.title,
        "explanation": rec.explanation,
        "change_text": rec.change.text if rec.change else "",
        "change_apply": rec.change.apply if rec.change else "",
        "effect": rec.effect,
        "cost": rec.cost,
        "evidence": _evidence_json(rec),
        "references": list(rec.references),
    }


@dataclass
class EvaluationOutcome:
    """What one evaluation of a server changed."""

    server_id: int
    opened: list[int] = field(default_factory=list)
    reopened: list[int] = field(default_factory=list)
    updated: list[int] = field(default_factory=list)
    cleared: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str = ""


def recommendations_apply(
    *, server: Server, found_now: list[found.Advice], now: datetime, clear_after: timedelta
) -> EvaluationOutcome:
    """Persist one evaluation's findings: create, refresh, reopen, or clear (the lifecycle's core)."""
    out = EvaluationOutcome(server.pk)
    existing = {(r.rule, r.subject_key): r for r in Recommendation.objects.filter(server=server)}
    seen = set()
    for rec in found_now:
        key = (rec.rule, subject_key(rec.subject))
        seen.add(key)
        row = existing.get(key)
        fields = _fields(rec)
        if row is None:
            row = Recommendation.objects.create(
                server=server,
                rule=rec.rule,
                subject=rec.subject,
                subject_key=key[1],
                first_seen_at=now,
                opened_at=now,
                last_seen_at=now,
                **fields,
            )
            RecommendationEvent.objects.create(
                recommendation=row, at=now, kind=Kind.OPENED, severity=rec.severity, detail=rec.explanation
            )
            out.opened.append(row.pk)
            continue
        if row.status == Status.RESOLVED:
            # A user's "resolved" gets time for the change to show before the advice returns.
            if row.resolved_by_id is not None and now - row.resolved_at < clear_after:
                continue
            row.status, row.opened_at, row.times_opened = Status.OPEN, now, row.times_opened + 1
            row.acknowledged_at = row.acknowledged_by = row.resolved_at = row.resolved_by = None
            RecommendationEvent.objects.create(
                recommendation=row, at=now, kind=Kind.REOPENED, severity=rec.severity, detail=rec.explanation
            )
            out.reopened.append(row.pk)
        elif row.severity != rec.severity:
            RecommendationEvent.objects.create(
                recommendation=row, at=now, kind=Kind.SEVERITY, severity=rec.severity, detail=rec.explanation
            )
            out.updated.append(row.pk)
        for name, value in fields.items():
            setattr(row, name, value)
        row.last_seen_at = now
        row.save()
    # One recommendation per change: a row this evaluation no longer finds, whose setting another finding changes
    # now (rule 1's "below the default" when the raise takes over, or the same advice with a value of another
    # day), is cleared at once, not after clear_after.
    asked = {found.change_target(rec.change.text): rec.title for rec in found_now if rec.change}
    for key, row in existing.items():
        if key in seen or row.status == Status.RESOLVED:
            continue
        if row.change_text and (target := found.change_target(row.change_text)) in asked:
            detail = f'Now part of "{asked[target]}": one recommendation per change ({target}).'
        elif now - row.last_seen_at >= clear_after:
            detail = f"Not seen since {row.last_seen_at:%Y-%m-%d %H:%M} UTC (clear for {clear_after})."
        else:
            continue
        row.status, row.resolved_at, row.resolved_by = Status.RESOLVED, now, None
        row.save(update_fields=["status", "resolved_at", "resolved_by"])
        RecommendationEvent.objects.create(
            recommendation=row, at=now, kind=Kind.CLEARED, severity=row.severity, detail=detail
        )
        out.cleared.append(row.pk)
    return out


def server_advise(*, server_id: int, now: datetime | None = None) -> EvaluationOutcome:
    """Evaluate one server now and persist the result. A failure is recorded on its Evaluation row and
    never touches its recommendations (nothing is cleared on an evaluation that did not happen)."""
    now = now or timezone.now()
    server = Server.objects.select_related("organization").get(pk=server_id)
    thresholds = organization_thresholds(organization=server.organization)
    try:
        gathered = server_evidence(server=server, now=now)
        found_now = evaluate(gathered.evidence, thresholds) if gathered.evidence is not None else []
    except SoftTimeLimitExceeded:
        drop_history_connection()  # its query may still run on the history store: cancelled
        error = (
            f"The evaluation ran past its time limit (ADVISOR_TIME_LIMIT_S = {settings.ADVISOR_TIME_LIMIT_S} s) "
            "and was stopped; the next run tries again."
        )
        log.warning("advisor: server %s: %s", server_id, error)
        Evaluation.objects.update_or_create(server=server, defaults={"at": now, "error": error})
        return EvaluationOutcome(server_id, error=error)
    except Exception as exc:  # the history store down, a selector bug: recorded, next run retries
        log.exception("advisor: evaluating server %s failed", server_id)
        Evaluation.objects.update_or_create(
            server=server, defaults={"at": now, "error": f"{type(exc).__name__}: {exc}"}
        )
        return EvaluationOutcome(server_id, error=str(exc))
    with transaction.atomic():
        out = recommendations_apply(server=server, found_now=found_now, now=now, clear_after=thresholds.clear_after)
        Evaluation.objects.update_or_create(
            server=server, defaults={"at": now, "partial": gathered.partial, "notes": gathered.notes, "error": ""}
        )
    out.notes = gathered.notes
    return out


def _locked(recommendation_id: int) -> Recommendation:
    """The row, locked until the transaction ends: two clicks at once make one step and one clear error."""
    return Recommendation.objects.select_for_update().get(pk=recommendation_id)


@transaction.atomic
def recommendation_acknowledge(*, recommendation_id: int, user: AbstractBaseUser) -> Recommendation:
    recommendation = _locked(recommendation_id)
    if recommendation.status != Status.OPEN:
        raise LifecycleError(f"only an open recommendation can be acknowledged (this one is {recommendation.status})")
    now = timezone.now()
    recommendation.status, recommendation.acknowledged_at, recommendation.acknowledged_by = (
        Status.ACKNOWLEDGED,
        now,
        user,
    )
    recommendation.save(update_fields=["status", "acknowledged_at", "acknowledged_by"])
    RecommendationEvent.objects.create(
        recommendation=recommendation, at=now, kind=Kind.ACKNOWLEDGED, severity=recommendation.severity, user=user
    )
    return recommendation


@transaction.atomic
def recommendation_resolve(*, recommendation_id: int, user: AbstractBaseUser) -> Recommendation:
    recommendation = _locked(recommendation_id)
    if recommendation.status == Status.RESOLVED:
        raise LifecycleError("this recommendation is already resolved")
    now = timezone.now()
    recommendation.status, recommendation.resolved_at, recommendation.resolved_by = Status.RESOLVED, now, user
    recommendation.save(update_fields=["status", "resolved_at", "resolved_by"])
    RecommendationEvent.objects.create(
        recommendation=recommendation, at=now, kind=Kind.RESOLVED, severity=recommendation.severity, user=user
    )
    return recommendation


def organization_thresholds_update(*, organization: Organization, values: dict) -> OrganizationThresholds:
    """Set an organization's overrides; a value of None returns that threshold to its default."""
    unknown = set(values) - {o.field for o in OVERRIDES}
    if unknown:
        raise ValueError(f"not an advisor threshold: {', '.join(sorted(unknown))}")
    row, _ = OrganizationThresholds.objects.get_or_create(organization=organization)
    for name, value in values.items():
        setattr(row, name, value)
    row.full_clean()
    row.save()
    return row
