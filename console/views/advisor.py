"""The advisor's pages: the active recommendations of the fleet and of one server (most severe first),
one recommendation with its history, and acknowledging or resolving one (DBA and admin members only).
Recommendations are read through advisor.selectors alone; the lifecycle goes through advisor.services."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.access import (
    MANAGE_SERVERS,
    managed_organizations,
    require_role,
    server_for,
    visible_organizations,
    visible_servers,
)
from advisor import sources
from advisor.selectors import (
    CHANGE_APPLY_TEXT,
    EvaluationRow,
    RecommendationRow,
    evaluations,
    recommendation_history,
    recommendations,
)
from advisor.services import LifecycleError, recommendation_acknowledge, recommendation_resolve
from console.charts import Chart, Series, time_chart
from console.views.common import render_page

SEVERITIES = ("critical", "warning", "info")
HISTORY_LIMIT = 50


@dataclass(frozen=True)
class Card:
    """One recommendation as a page shows it."""

    rec: RecommendationRow
    can_act: bool  # the user is a DBA or admin of the server's organization
    apply_text: str
    references: list[tuple[str, str]]  # (text, URL or "" when the reference is not a web address)
    charts: list[Chart] = field(default_factory=list)


def evidence_charts(rec: RecommendationRow) -> list[Chart]:
    """The recommendation's evidence series as charts: series with the same unit over the same times share one."""
    groups: dict[tuple[str, tuple[str, ...]], list[dict]] = {}
    for s in rec.evidence:
        times = tuple(point[0] for point in s.get("points") or [])
        if times:
            groups.setdefault((s.get("unit", ""), times), []).append(s)
    charts = []
    for i, ((unit, times), group) in enumerate(groups.items()):
        labels = ", ".join(s.get("label", "") for s in group)
        title = labels if not unit or unit == labels else f"{labels} ({unit})"
        values = [[point[1] for point in s["points"]] for s in group]
        if all(v is None for series in values for v in series):
            charts.append(Chart(f"evidence-{rec.id}-{i}", title, None, "No value was measured in this window."))
            continue
        # Each value drawn flat across what it covers, where the evidence says (stored before: points only).
        ends = group[0].get("ends")
        spec = time_chart(
            x=[datetime.fromisoformat(t) for t in times],
            x_end=[datetime.fromisoformat(t) for t in ends] if ends and len(ends) == len(times) else None,
            series=[Series(s.get("label", ""), v) for s, v in zip(group, values, strict=True)],
            unit=unit,
        )
        charts.append(Chart(f"evidence-{rec.id}-{i}", title, spec))
    return charts


def _references(rec: RecommendationRow) -> list[tuple[str, str]]:
    return [sources.link(r) for r in rec.references]


def _card(rec: RecommendationRow, acting: set[int], organization_of: dict[int, int], *, charts: bool) -> Card:
    return Card(
        rec=rec,
        can_act=organization_of.get(rec.server_id) in acting,
        apply_text=CHANGE_APPLY_TEXT.get(rec.change_apply, rec.change_apply),
        references=_references(rec),
        charts=evidence_charts(rec) if charts else [],
    )


def _by_severity(cards: list[Card]) -> list[tuple[str, list[Card]]]:
    """(severity, its cards) for each severity that has some, most severe first."""
    groups = [(s, [c for c in cards if c.rec.severity == s]) for s in SEVERITIES]
    return [(s, cs) for s, cs in groups if cs]


def _acting_organizations(user) -> set[int]:
    """The organizations where the user may acknowledge and resolve (DBA or admin; superusers everywhere)."""
    return set(managed_organizations(user, MANAGE_SERVERS).values_list("pk", flat=True))


def _parse_organization(params, organization_ids: set[int]) -> tuple[int | None, str]:
    """?org= as the fleet page reads it: (the organization, or None; why the one asked for was not used)."""
    if not params.get("org"):
        return None, ""
    try:
        organization_id = int(params["org"])
    except ValueError:
        organization_id = -1
    if organization_id not in organization_ids:
        # The same words whether it does not exist or is another's: nothing is confirmed.
        return None, f"organization {params['org']!r} is not one of yours"
    return organization_id, ""


def fleet_advisor(request: HttpRequest) -> HttpResponse:
    """/advisor/: the active recommendations of every visible server (?org= keeps one organization), by
    severity, and the latest resolved ones."""
    organizations = list(visible_organizations(request.user).order_by("name"))
    organization_id, error = _parse_organization(request.GET, {o.pk for o in organizations})
    servers = visible_servers(request.user)
    if organization_id is not None:
        servers = servers.filter(organization_id=organization_id)
    organization_of = dict(servers.values_list("pk", "organization_id"))
    acting = _acting_organizations(request.user)
    active = recommendations(server_ids=list(organization_of))
    cards = [_card(r, acting, organization_of, charts=False) for r in active]
    context = {
        "organizations": organizations,
        "organization_id": organization_id,
        "errors": [error] if error else [],
        "groups": _by_severity(cards),
        "active_count": len(cards),
        "server_count": len(organization_of),
        "history": recommendations(server_ids=list(organization_of), active=False, limit=HISTORY_LIMIT),
        "history_limit": HISTORY_LIMIT,
        "show_server": True,
    }
    return render_page(request, "console/advisor.html", context)


def server_advisor(request: HttpRequest, server_id: int) -> HttpResponse:
    """/servers/<id>/advisor/: the server's active recommendations with their evidence charts, its last
    evaluation, and its resolved ones."""
    server = server_for(request.user, server_id)
    organization_of = {server.pk: server.organization_id}
    acting = _acting_organizations(request.user)
    cards = [_card(r, acting, organization_of, charts=True) for r in recommendations(server_ids=[server.pk])]
    context = {
        "server": server,
        "evaluation": evaluations(server_ids=[server.pk]).get(server.pk),
        "groups": _by_severity(cards),
        "active_count": len(cards),
        "history": recommendations(server_ids=[server.pk], active=False, limit=HISTORY_LIMIT),
        "history_limit": HISTORY_LIMIT,
        "show_server": False,
    }
    return render_page(request, "console/advisor_server.html", context)


def recommendation_detail(request: HttpRequest, recommendation_id: int) -> HttpResponse:
    """/advisor/recommendations/<id>/: one recommendation, its evidence and every step of its life."""
    organization_of = dict(visible_servers(request.user).values_list("pk", "organization_id"))
    history = recommendation_history(recommendation_id=recommendation_id, server_ids=list(organization_of))
    if history is None:
        raise Http404("no such recommendation")
    rec = history.recommendation
    evaluation: EvaluationRow | None = evaluations(server_ids=[rec.server_id]).get(rec.server_id)
    context = {
        "card": _card(rec, _acting_organizations(request.user), organization_of, charts=True),
        "events": history.events,
        "evaluation": evaluation,
        "show_server": True,
    }
    return render_page(request, "console/advisor_recommendation.html", context)


def _lifecycle(request: HttpRequest, recommendation_id: int, action, verb: str, done: str) -> HttpResponse:
    """Acknowledge or resolve: 404 for a recommendation the user cannot see, 403 for a viewer; a step that
    does not apply to its state is a message, not an error page."""
    visible = list(visible_servers(request.user).values_list("pk", flat=True))
    history = recommendation_history(recommendation_id=recommendation_id, server_ids=visible)
    if history is None:
        raise Http404("no such recommendation")
    rec = history.recommendation
    require_role(request.user, rec.organization_id, MANAGE_SERVERS)
    try:
        action(recommendation_id=rec.id, user=request.user)  # locks the row: two clicks make one step
    except LifecycleError as exc:
        messages.error(request, f"Could not {verb} “{rec.title}”: {exc}.")
    else:
        messages.success(request, f"{done}: {rec.title} ({rec.server}).")
    fallback = reverse("server-advisor", args=[rec.server_id])
    return HttpResponseRedirect(_safe_next(request, fallback))


def _safe_next(request: HttpRequest, fallback: str) -> str:
    """The `next` of the form when it is a path of this site, else `fallback`."""
    target = request.POST.get("next", "")
    if target.startswith("/") and url_has_allowed_host_and_scheme(target, allowed_hosts=None):
        return target
    return fallback


@require_POST
def acknowledge(request: HttpRequest, recommendation_id: int) -> HttpResponse:
    return _lifecycle(request, recommendation_id, recommendation_acknowledge, "acknowledge", "Acknowledged")


@require_POST
def resolve(request: HttpRequest, recommendation_id: int) -> HttpResponse:
    return _lifecycle(request, recommendation_id, recommendation_resolve, "resolve", "Resolved")


urlpatterns = [
    path("advisor/", fleet_advisor, name="advisor"),
    path("servers/<int:server_id>/advisor/", server_advisor, name="server-advisor"),
    path("advisor/recommendations/<int:recommendation_id>/", recommendation_detail, name="advisor-recommendation"),
    path("advisor/recommendations/<int:recommendation_id>/acknowledge/", acknowledge, name="advisor-acknowledge"),
    path("advisor/recommendations/<int:recommendation_id>/resolve/", resolve, name="advisor-resolve"),
]
