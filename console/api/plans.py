"""/api/v1/ plans: a statement's plans (each shape it was planned with, the current first, and its last EXPLAIN's
outcome), one plan by its fingerprint (the stored JSON and its text), and a fresh EXPLAIN asked for now (202 and
a task to poll, as a collection asked for now, within the user's EXPLAIN rates: 429 with Retry-After past them),
from the selectors the statement page reads."""

from __future__ import annotations

from django.http import Http404
from django.urls import path, reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import MANAGE_SERVERS, require_role
from collectors.public import plan_tracked, tracked
from console.api.common import api
from console.api.servers import TaskOut, task_out
from console.api.statements import statement_of
from console.api.throttling import page_rate
from console.throttling import EXPLAIN_RATES
from presentation.plans import plan_text
from readtier import index_candidates, plan_detail, statement_owner, statement_plans


class PlanRowOut(serializers.Serializer):
    fingerprint = serializers.CharField(help_text="the plan's shape: node types, relations, indexes, joins")
    access_paths = serializers.ListField(child=serializers.CharField(), help_text="what it reads, in plan order")
    node_count = serializers.IntegerField()
    first_seen_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField()
    total_cost = serializers.FloatField(help_text="the last plan of this shape's estimated total cost")
    plan_rows = serializers.FloatField(help_text="and its estimated rows")
    method = serializers.ChoiceField(choices=["generic_plan", "prepare"])
    plan_url = serializers.CharField()


class AttemptOut(serializers.Serializer):
    at = serializers.DateTimeField()
    code = serializers.CharField(help_text='"planned", or why there is no plan: permission, gone, timeout, ...')
    reason = serializers.CharField(allow_blank=True)


class CandidateOut(serializers.Serializer):
    at = serializers.DateTimeField(help_text="when the plan it was judged from was read")
    database = serializers.CharField()
    schema = serializers.CharField()
    table = serializers.CharField()
    partition_of = serializers.CharField(allow_null=True, help_text="schema.table of its partitioned table, or null")
    columns = serializers.ListField(child=serializers.CharField(), help_text="the index asked for; []: none")
    method = serializers.ChoiceField(choices=["cost-verified", "estimated"], help_text="how it was costed")
    selectivity = serializers.FloatField(allow_null=True, help_text="the share of the rows its filter keeps")
    reltuples = serializers.FloatField(help_text="the table's rows, as the planner estimates them")
    cost_before = serializers.FloatField(help_text="the plan's estimated cost now")
    cost_after = serializers.FloatField(allow_null=True, help_text="with the index; null: none asked for")
    size_bytes = serializers.IntegerField(allow_null=True, help_text="the index's estimated size")
    reason = serializers.CharField(allow_blank=True, help_text="why no index, when none is asked for")


class StatementPlansOut(serializers.Serializer):
    statement_id = serializers.IntegerField()
    server_id = serializers.IntegerField()
    plans = PlanRowOut(many=True, help_text="the most recently seen first: the first is the current plan")
    last_attempt = AttemptOut(allow_null=True, help_text="null: never EXPLAINed")
    index_candidates = CandidateOut(
        many=True, help_text="each scan of the current plan that filters a table: the index it asks for, or why none"
    )


def candidate_out(c) -> dict:
    return {
        "at": c.at,
        "database": c.database,
        "schema": c.schema_name,
        "table": c.table_name,
        "partition_of": c.partitioned_table,
        "columns": list(c.columns),
        "method": c.method,
        "selectivity": c.selectivity,
        "reltuples": c.reltuples,
        "cost_before": c.cost_before,
        "cost_after": c.cost_after,
        "size_bytes": c.size_bytes,
        "reason": c.reason,
    }


class PlanOut(serializers.Serializer):
    statement_id = serializers.IntegerField()
    fingerprint = serializers.CharField()
    access_paths = serializers.ListField(child=serializers.CharField())
    node_count = serializers.IntegerField()
    first_seen_at = serializers.DateTimeField(help_text="when this shape was first seen on the server")
    plan = serializers.JSONField(help_text="EXPLAIN (FORMAT JSON)'s object, its strings redacted as texts are")
    text = serializers.CharField(help_text="the same plan as EXPLAIN's text format shows it")


class StatementPlansView(APIView):
    @extend_schema(operation_id="statement_plans", responses=StatementPlansOut)
    def get(self, request, statement_id: int):
        owner, _ = statement_of(request, statement_id, statement_owner)
        found = statement_plans(server_id=owner.server_id, statement_id=owner.statement_id)
        attempt = found.attempt
        return Response(
            {
                "statement_id": owner.statement_id,
                "server_id": owner.server_id,
                "plans": [
                    {
                        **{f: getattr(p, f) for f in PlanRowOut().fields if f != "plan_url"},
                        "plan_url": request.build_absolute_uri(_plan_url(owner.statement_id, p.fingerprint)),
                    }
                    for p in found.plans
                ],
                "last_attempt": None
                if attempt is None
                else {"at": attempt.at, "code": attempt.code, "reason": attempt.reason},
                "index_candidates": [
                    candidate_out(c)
                    for c in index_candidates(server_id=owner.server_id, statement_id=owner.statement_id)
                ],
            }
        )

    @extend_schema(
        operation_id="statement_plan_now",
        request=None,
        responses={202: TaskOut},
        description="EXPLAIN the statement now on its server (its generic plan, never run; within the server's "
        "plan budget, and the user's EXPLAIN rates: 429 with Retry-After past them): poll status_url; its result "
        "names the plan's fingerprint, or why there is none.",
    )
    def post(self, request, statement_id: int):
        owner, server = statement_of(request, statement_id, statement_owner)
        require_role(request.user, server.organization_id, MANAGE_SERVERS)  # it costs the monitored server
        page_rate(request, EXPLAIN_RATES, "EXPLAINs asked for")
        task_id = plan_tracked(server.pk, owner.statement_id)
        return Response(task_out(task_id, tracked(task_id)), status=status.HTTP_202_ACCEPTED)


def _plan_url(statement_id: int, fingerprint: str) -> str:
    return reverse("api-statement-plan", args=[statement_id, fingerprint])


class PlanView(APIView):
    @extend_schema(operation_id="statement_plan_read", responses=PlanOut)
    def get(self, request, statement_id: int, fingerprint: str):
        owner, _ = statement_of(request, statement_id, statement_owner)
        try:
            detail = plan_detail(server_id=owner.server_id, fingerprint=fingerprint, statement_id=owner.statement_id)
        except LookupError as exc:
            raise Http404(str(exc)) from None
        return Response(
            {
                "statement_id": owner.statement_id,
                "fingerprint": detail.fingerprint,
                "access_paths": detail.access_paths,
                "node_count": detail.node_count,
                "first_seen_at": detail.first_seen_at,
                "plan": detail.plan,
                "text": plan_text(detail.plan),
            }
        )


urlpatterns = [
    path("statements/<int:statement_id>/plans/", api(StatementPlansView.as_view()), name="api-statement-plans"),
    path(
        "statements/<int:statement_id>/plans/<str:fingerprint>/",
        api(PlanView.as_view()),
        name="api-statement-plan",
    ),
]
