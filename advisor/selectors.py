"""The one read path of the advisor's output: pages, `manage.py advise`, the API, reports and exports
read recommendations only through these (keyword-only, typed, dataclass results), so a count shown in
two places is the same count."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.db.models import Case, Count, IntegerField, Q, Value, When

from advisor import sources
from advisor.models import (
    Evaluation,
    OrganizationThresholds,
    Recommendation,
    RecommendationEvent,
    Severity,
    Status,
)
from advisor.thresholds import OVERRIDES

ACTIVE = (Status.OPEN, Status.ACKNOWLEDGED)
# The rules whose advice is about a server's indexes: the Indexes page and the weekly report's section list them.
INDEX_RULES = ("missing_index", "index_effect", "unused_index", "redundant_index")
_RANK = Case(
    When(severity=Severity.CRITICAL, then=Value(2)),
    When(severity=Severity.WARNING, then=Value(1)),
    default=Value(0),
    output_field=IntegerField(),
)


# What applying a change needs (RecommendationRow.change_apply), in a DBA's words: the console, the weekly mail
# and the audit PDF say it the same way.
CHANGE_APPLY_TEXT = {
    "restart": "needs a server restart",
    "reload": "needs a configuration reload (SELECT pg_reload_conf())",
    "none": "takes effect at once",
    "client": "a change in the application or its connection settings",
}


@dataclass(frozen=True)
class RecommendationRow:
    id: int
    server_id: int
    server: str
    organization_id: int
    organization: str
    rule: str
    subject: str
    severity: str
    status: str
    title: str
    explanation: str
    change_text: str
    change_apply: str  # restart | reload | none | client | "" (no change to make)
    effect: str
    cost: str
    evidence: list[dict]  # [{"label", "unit", "points": [[iso time, value|null], ...]}]
    references: list[str]  # public citations (advisor/sources.py), an address last when there is one
    first_seen_at: datetime
    opened_at: datetime
    last_seen_at: datetime
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    resolved_at: datetime | None
    resolved_by: str | None  # None with resolved_at: resolved automatically
    times_opened: int

    def as_json(self) -> dict:
        return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in asdict(self).items()}


def _row(r: Recommendation) -> RecommendationRow:
    return RecommendationRow(
        id=r.pk,
        server_id=r.server_id,
        server=r.server.name,
        organization_id=r.server.organization_id,
        organization=r.server.organization.name,
        rule=r.rule,
        subject=r.subject,
        severity=r.severity,
        status=r.status,
        title=r.title,
        explanation=r.explanation,
        change_text=r.change_text,
        change_apply=r.change_apply,
        effect=r.effect,
        cost=r.cost,
        evidence=r.evidence,
        references=sources.public(r.references),
        first_seen_at=r.first_seen_at,
        opened_at=r.opened_at,
        last_seen_at=r.last_seen_at,
        acknowledged_at=r.acknowledged_at,
        acknowledged_by=r.acknowledged_by.get_username() if r.acknowledged_by else None,
        resolved_at=r.resolved_at,
        resolved_by=r.resolved_by.get_username() if r.resolved_by else None,
        times_opened=r.times_opened,
    )


def _base(server_ids: Iterable[int]):
    return Recommendation.objects.filter(server_id__in=list(server_ids)).select_related(
        "server__organization", "acknowledged_by", "resolved_by"
    )


def recommendations(
    *,
    server_ids: Iterable[int],
    active: bool = True,
    limit: int | None = None,
    rules: Iterable[str] | None = None,
) -> list[RecommendationRow]:
    """Active ones (open and acknowledged) most severe first, newest first within a severity; or with
    active=False the resolved ones, most recently resolved first; of the `rules` given, or of every rule."""
    qs = _base(server_ids)
    if rules is not None:
        qs = qs.filter(rule__in=list(rules))
    if active:
        qs = qs.filter(status__in=ACTIVE).annotate(rank=_RANK).order_by("-rank", "-opened_at", "server__name", "id")
    else:
        qs = qs.filter(status=Status.RESOLVED).order_by("-resolved_at", "id")
    if limit is not None:
        qs = qs[:limit]
    return [_row(r) for r in qs]


@dataclass(frozen=True)
class Counts:
    """Active recommendations of a server by severity."""

    critical: int = 0
    warning: int = 0
    info: int = 0

    @property
    def total(self) -> int:
        return self.critical + self.warning + self.info

    @property
    def worst(self) -> str | None:
        return "critical" if self.critical else "warning" if self.warning else "info" if self.info else None


def recommendation_counts(*, server_ids: Iterable[int]) -> dict[int, Counts]:
    """Per server (every id asked for, zero where none), in one query."""
    ids = list(server_ids)
    rows = (
        Recommendation.objects.filter(server_id__in=ids, status__in=ACTIVE)
        .values("server_id")
        .annotate(**{s: Count("id", filter=Q(severity=s)) for s in ("critical", "warning", "info")})
    )
    out = {sid: Counts() for sid in ids}
    for r in rows:
        out[r["server_id"]] = Counts(r["critical"], r["warning"], r["info"])
    return out


@dataclass(frozen=True)
class EventRow:
    at: datetime
    kind: str  # opened | reopened | severity | acknowledged | resolved | cleared
    severity: str
    user: str | None
    detail: str


@dataclass(frozen=True)
class RecommendationHistory:
    recommendation: RecommendationRow
    events: list[EventRow] = field(default_factory=list)


def recommendation_history(*, recommendation_id: int, server_ids: Iterable[int]) -> RecommendationHistory | None:
    """One recommendation with its events, oldest first; None when it is not among `server_ids`' (the
    caller's organizations): the page answers 404."""
    r = _base(server_ids).filter(pk=recommendation_id).first()
    if r is None:
        return None
    events = RecommendationEvent.objects.filter(recommendation=r).select_related("user").order_by("at", "id")
    return RecommendationHistory(
        _row(r),
        [EventRow(e.at, e.kind, e.severity, e.user.get_username() if e.user else None, e.detail) for e in events],
    )


@dataclass(frozen=True)
class EvaluationRow:
    server_id: int
    at: datetime
    partial: bool
    notes: list[str]
    error: str


def evaluations(*, server_ids: Iterable[int]) -> dict[int, EvaluationRow]:
    """The latest evaluation of each server that has one."""
    return {
        e.server_id: EvaluationRow(e.server_id, e.at, e.partial, list(e.notes), e.error)
        for e in Evaluation.objects.filter(server_id__in=list(server_ids))
    }


def threshold_overrides(*, organization_id: int) -> dict[str, float | int | None]:
    """The organization's advisor thresholds as stored, by field (None: the default applies)."""
    names = [o.field for o in OVERRIDES]
    row = OrganizationThresholds.objects.filter(organization_id=organization_id).values(*names).first()
    return row or dict.fromkeys(names)


@dataclass(frozen=True)
class ActivityRow:
    """A recommendation opened or resolved inside a window (the weekly report's "what the advisor did")."""

    recommendation_id: int
    server_id: int
    server: str
    rule: str
    subject: str
    title: str
    severity: str  # at that moment
    kind: str  # opened (first time or again) | resolved (by a user or automatically)
    at: datetime
    by: str | None  # the user who resolved it; None: opened by the advisor, or resolved automatically


_ACTIVITY = {
    RecommendationEvent.Kind.OPENED: "opened",
    RecommendationEvent.Kind.REOPENED: "opened",
    RecommendationEvent.Kind.RESOLVED: "resolved",
    RecommendationEvent.Kind.CLEARED: "resolved",
}


def recommendation_activity(*, server_ids: Iterable[int], start: datetime, end: datetime) -> list[ActivityRow]:
    """Recommendations opened (or reopened) and resolved (by a user or cleared) in [start, end), oldest first."""
    events = (
        RecommendationEvent.objects.filter(
            recommendation__server_id__in=list(server_ids), at__gte=start, at__lt=end, kind__in=list(_ACTIVITY)
        )
        .select_related("recommendation__server", "user")
        .order_by("at", "id")
    )
    return [
        ActivityRow(
            recommendation_id=e.recommendation_id,
            server_id=e.recommendation.server_id,
            server=e.recommendation.server.name,
            rule=e.recommendation.rule,
            subject=e.recommendation.subject,
            title=e.recommendation.title,
            severity=e.severity,
            kind=_ACTIVITY[e.kind],
            at=e.at,
            by=e.user.get_username() if e.user else None,
        )
        for e in events
    ]
