"""A statement's Plan tab: its current plan (or another of its shapes) as a tree of nodes with what each reads, its
conditions, its estimates and its share of the cost, the costliest marked; the shapes it was planned with; its last
EXPLAIN's outcome, never a blank; and each plan as JSON and as EXPLAIN's text to download. The plan's strings come
from monitored servers: escaped like every text."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from accounts.access import MANAGE_SERVERS, require_role, role_in, server_for, visible_organization_ids
from collectors.public import plan_tracked, tracked
from console import throttling
from console.views.common import render_page, server_header
from presentation.formatting import DASH, bytes_text, number_text
from presentation.plans import plan_nodes, plan_text
from readtier import CandidateRow, StatementPlans, index_candidates, plan_detail, statement_detail_of, statement_plans

METHODS = {
    "generic_plan": "EXPLAIN (GENERIC_PLAN), by earlier versions",
    "prepare": "prepared statement, NULL parameters",
}
INDENTED = 16  # tree levels the page indents (deeper nodes stay at this indent, their level written beside)


def _statement(request: HttpRequest, statement_id: int):
    """The statement and its server, as the statement page finds them: a 404 unless the user sees it."""
    try:
        detail = statement_detail_of(statement_id=statement_id, organization_ids=visible_organization_ids(request.user))
    except LookupError:
        raise Http404("no such statement") from None
    return detail, server_for(request.user, detail.server_id)


def _plan_of(server_id: int, statement_id: int, fingerprint: str):
    """One plan of the statement by fingerprint; a fingerprint this statement never had is a 404."""
    try:
        return plan_detail(server_id=server_id, fingerprint=fingerprint, statement_id=statement_id)
    except LookupError as exc:
        raise Http404(str(exc)) from None


def _shown(found: StatementPlans, server_id: int, statement_id: int, fingerprint: str | None):
    """The plan asked for (?plan=), else the current one (None: never planned)."""
    if fingerprint is None and found.current is not None:
        fingerprint = found.current.fingerprint
    return None if fingerprint is None else _plan_of(server_id, statement_id, fingerprint)


@dataclass(frozen=True)
class CandidateLine:
    """One filtered scan of the current plan: the index it asks for, or why none."""

    table: str
    partition_of: str  # its partitioned table's name, when it is a partition
    columns: str  # "" when none is asked for
    judged: str  # how it was costed, or why no index
    cost: str  # the plan's estimated cost now → with the index
    size: str


def candidate_line(c: CandidateRow) -> CandidateLine:
    asked = c.asks
    return CandidateLine(
        table=f"{c.schema_name}.{c.table_name}",
        partition_of=c.partitioned_table or "",
        columns=", ".join(c.columns) if asked else "",
        judged=c.method if asked else c.reason,
        cost=f"{number_text(c.cost_before, 0)} → {number_text(c.cost_after, 0)}" if asked else DASH,
        size=bytes_text(c.size_bytes) if asked and c.size_bytes else DASH,
    )


def _asked(request: HttpRequest, server_id: int) -> dict | None:
    """The EXPLAIN this page asked for (?asked=, its task id) as the plans worker left it: queued, running,
    succeeded (its result: planned, or the reason there is no plan) or failed; None when unknown, more than an hour
    old, or another server's."""
    task_id = request.GET.get("asked") or ""
    state = tracked(task_id) if task_id else None
    if state is None or state["server_id"] != server_id:
        return None
    return {**state, "task_id": task_id, "waiting": state["status"] in ("queued", "running")}


def statement_plan(request: HttpRequest, statement_id: int) -> HttpResponse:
    detail, server = _statement(request, statement_id)
    found = statement_plans(server_id=server.pk, statement_id=detail.statement_id)
    shown = _shown(found, server.pk, detail.statement_id, request.GET.get("plan") or None)
    nodes = plan_nodes(shown.plan) if shown else []
    context = {
        **server_header(server),
        "detail": detail,
        "found": found,
        "shown": shown,
        "shown_row": next((p for p in found.plans if shown and p.fingerprint == shown.fingerprint), None),
        "rows": [(n, min(n.depth, INDENTED), f"{n.share:.1%}") for n in nodes],
        "failed": found.attempt is not None and not found.attempt.planned,
        "history": [(p, METHODS.get(p.method, p.method)) for p in found.plans],
        "can_plan": role_in(request.user, server.organization_id) in MANAGE_SERVERS,  # it costs the server
        "asked": _asked(request, server.pk),
        "candidates": [
            candidate_line(c) for c in index_candidates(server_id=server.pk, statement_id=detail.statement_id)
        ],
    }
    if context["shown_row"] is not None:
        context["shown_method"] = METHODS.get(context["shown_row"].method, context["shown_row"].method)
    return render_page(request, "console/statement_plan.html", context, fragment="plan-body")


@require_POST
def statement_plan_now(request: HttpRequest, statement_id: int) -> HttpResponse:
    """EXPLAIN the statement now (DBAs and admins: it costs the monitored server, within its plan budget), on the
    plans worker as the API's fresh EXPLAIN; the Plan tab then follows it until the plan, or its reason, is in.
    Past the user's EXPLAIN rates (PAGE_RATES, the API's with them), the tab says how long to wait."""
    detail, server = _statement(request, statement_id)
    require_role(request.user, server.organization_id, MANAGE_SERVERS)
    if wait := throttling.wait_s(request, *throttling.EXPLAIN_RATES):
        messages.error(request, f"Too many EXPLAINs asked for: try again in {throttling.wait_text(wait)}.")
        return redirect("statement-plan", detail.statement_id)
    task_id = plan_tracked(server.pk, detail.statement_id)
    messages.success(request, "EXPLAIN asked of the plans worker: its plan, or why there is none, shows here.")
    return redirect(reverse("statement-plan", args=[detail.statement_id]) + f"?asked={task_id}")


def _download(request: HttpRequest, statement_id: int, fingerprint: str, kind: str) -> HttpResponse:
    detail, server = _statement(request, statement_id)
    shown = _plan_of(server.pk, detail.statement_id, fingerprint)
    if kind == "json":
        body, content_type = json.dumps(shown.plan, indent=2) + "\n", "application/json"
    else:
        body, content_type = plan_text(shown.plan), "text/plain; charset=utf-8"
    response = HttpResponse(body, content_type=content_type)
    name = "".join(  # a file name any browser and shell takes as it is
        c if c.isascii() and (c.isalnum() or c in "_.-") else "_"
        for c in f"plan-{server.name}-{detail.queryid}-{fingerprint[:12]}.{kind}"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def statement_plan_json(request: HttpRequest, statement_id: int, fingerprint: str) -> HttpResponse:
    return _download(request, statement_id, fingerprint, "json")


def statement_plan_text(request: HttpRequest, statement_id: int, fingerprint: str) -> HttpResponse:
    return _download(request, statement_id, fingerprint, "txt")


urlpatterns = [
    path("statements/<int:statement_id>/plan/", statement_plan, name="statement-plan"),
    path("statements/<int:statement_id>/plan/now/", statement_plan_now, name="statement-plan-now"),
    path("statements/<int:statement_id>/plan/<str:fingerprint>.json", statement_plan_json, name="statement-plan-json"),
    path("statements/<int:statement_id>/plan/<str:fingerprint>.txt", statement_plan_text, name="statement-plan-text"),
]
