"""/api/v1/recommendations/: the advisor's recommendations on the caller's servers, one with its history,
and acknowledging or resolving one (DBA or admin of its organization). Read through advisor.selectors,
written through advisor.services: the console's advisor pages show the same."""

from __future__ import annotations

from django.http import Http404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import MANAGE_SERVERS, require_role, visible_servers
from advisor.models import Severity, Status
from advisor.selectors import RecommendationRow, recommendation_history, recommendations
from advisor.services import LifecycleError, recommendation_acknowledge, recommendation_resolve
from console.api.common import PAGE_PARAMETERS, TABLE_RENDERERS, api, field_names, page_of, page_schema
from console.api.errors import error_response


class ChangeOut(serializers.Serializer):
    text = serializers.CharField(help_text="the exact SQL or configuration change")
    apply = serializers.ChoiceField(choices=["restart", "reload", "none", "client"])


class EvidencePoint(serializers.ListField):
    child = serializers.JSONField()


class EvidenceOut(serializers.Serializer):
    label = serializers.CharField()
    unit = serializers.CharField()
    points = serializers.ListField(child=EvidencePoint(), help_text="[ISO time, value or null] pairs")
    ends = serializers.ListField(
        child=serializers.DateTimeField(),
        required=False,
        help_text="where each point's span ends (its time is where it starts): the value covers that span",
    )


class RecommendationOut(serializers.Serializer):
    id = serializers.IntegerField()
    server_id = serializers.IntegerField()
    server = serializers.CharField()
    organization_id = serializers.IntegerField()
    organization = serializers.CharField()
    rule = serializers.CharField()
    subject = serializers.CharField()
    severity = serializers.ChoiceField(choices=Severity.values)
    status = serializers.ChoiceField(choices=Status.values)
    title = serializers.CharField()
    explanation = serializers.CharField()
    change = ChangeOut(allow_null=True, help_text="null: nothing to change on the server")
    effect = serializers.CharField(allow_blank=True)
    cost = serializers.CharField(allow_blank=True)
    evidence = EvidenceOut(many=True)
    references = serializers.ListField(child=serializers.CharField())
    first_seen_at = serializers.DateTimeField()
    opened_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField()
    acknowledged_at = serializers.DateTimeField(allow_null=True)
    acknowledged_by = serializers.CharField(allow_null=True)
    resolved_at = serializers.DateTimeField(allow_null=True)
    resolved_by = serializers.CharField(allow_null=True, help_text="null with resolved_at: resolved automatically")
    times_opened = serializers.IntegerField()


RecommendationPage = page_schema(RecommendationOut, "RecommendationPage")


class EventOut(serializers.Serializer):
    at = serializers.DateTimeField()
    kind = serializers.CharField(help_text="opened | reopened | severity | acknowledged | resolved | cleared")
    severity = serializers.CharField()
    user = serializers.CharField(allow_null=True)
    detail = serializers.CharField(allow_blank=True)


class RecommendationDetailOut(RecommendationOut):
    events = EventOut(many=True)


def _out(r: RecommendationRow) -> dict:
    fields = [n for n in field_names(RecommendationOut) if n != "change"]
    out = {n: getattr(r, n) for n in fields}
    out["change"] = {"text": r.change_text, "apply": r.change_apply} if r.change_text else None
    return out


STATUSES = {"active": ("open", "acknowledged"), **{s: (s,) for s in Status.values}}


def _int(request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise exceptions.ValidationError({name: [f"{raw!r} is not an id"]}) from None


def _choice(request, name: str, choices) -> str | None:
    raw = request.query_params.get(name) or None
    if raw is not None and raw not in choices:
        raise exceptions.ValidationError({name: [f"{raw!r}: one of {', '.join(choices)}"]})
    return raw


class Recommendations(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(
        operation_id="recommendations_list",
        parameters=[
            OpenApiParameter("server", OpenApiTypes.INT, description="one server"),
            OpenApiParameter("organization", OpenApiTypes.INT, description="one organization's servers"),
            OpenApiParameter("severity", OpenApiTypes.STR, enum=Severity.values),
            OpenApiParameter(
                "status", OpenApiTypes.STR, enum=list(STATUSES), description="default active (open and acknowledged)"
            ),
            OpenApiParameter("rule", OpenApiTypes.STR, description="a rule code, e.g. pgss_max"),
            *PAGE_PARAMETERS,
        ],
        responses=RecommendationPage,
    )
    def get(self, request):
        server, organization = _int(request, "server"), _int(request, "organization")
        severity = _choice(request, "severity", Severity.values)
        state = _choice(request, "status", list(STATUSES)) or "active"
        rule = request.query_params.get("rule") or None
        servers = visible_servers(request.user)
        if server is not None:
            servers = servers.filter(pk=server)
        if organization is not None:
            servers = servers.filter(organization_id=organization)
        ids = list(servers.values_list("pk", flat=True))
        rows = []
        if "resolved" in STATUSES[state]:
            rows += recommendations(server_ids=ids, active=False)
        if set(STATUSES[state]) & {"open", "acknowledged"}:
            rows += [r for r in recommendations(server_ids=ids) if r.status in STATUSES[state]]
        rows = [r for r in rows if (severity is None or r.severity == severity) and (rule is None or r.rule == rule)]
        return page_of(rows, request, out=_out)


def _history(request, recommendation_id: int):
    visible = list(visible_servers(request.user).values_list("pk", flat=True))
    found = recommendation_history(recommendation_id=recommendation_id, server_ids=visible)
    if found is None:
        raise Http404("no such recommendation")
    return found


def _detail(found) -> dict:
    names = field_names(EventOut)
    return {**_out(found.recommendation), "events": [{n: getattr(e, n) for n in names} for e in found.events]}


class RecommendationView(APIView):
    @extend_schema(operation_id="recommendation_read", responses=RecommendationDetailOut)
    def get(self, request, recommendation_id: int):
        return Response(_detail(_history(request, recommendation_id)))


class _Step(APIView):
    step = staticmethod(recommendation_acknowledge)

    def post(self, request, recommendation_id: int):
        rec = _history(request, recommendation_id).recommendation
        require_role(request.user, rec.organization_id, MANAGE_SERVERS)
        try:
            self.step(recommendation_id=rec.id, user=request.user)
        except LifecycleError as exc:
            return error_response(status.HTTP_409_CONFLICT, "conflict", str(exc))
        return Response(_detail(_history(request, recommendation_id)))


class Acknowledge(_Step):
    step = staticmethod(recommendation_acknowledge)

    @extend_schema(operation_id="recommendation_acknowledge", request=None, responses=RecommendationDetailOut)
    def post(self, request, recommendation_id: int):
        return super().post(request, recommendation_id)


class Resolve(_Step):
    step = staticmethod(recommendation_resolve)

    @extend_schema(operation_id="recommendation_resolve", request=None, responses=RecommendationDetailOut)
    def post(self, request, recommendation_id: int):
        return super().post(request, recommendation_id)


urlpatterns = [
    path("recommendations/", api(Recommendations.as_view()), name="api-recommendations"),
    path("recommendations/<int:recommendation_id>/", api(RecommendationView.as_view()), name="api-recommendation"),
    path(
        "recommendations/<int:recommendation_id>/acknowledge/",
        api(Acknowledge.as_view()),
        name="api-recommendation-acknowledge",
    ),
    path("recommendations/<int:recommendation_id>/resolve/", api(Resolve.as_view()), name="api-recommendation-resolve"),
]
