"""GET /api/v1/fleet/: every server of the caller's organizations with its status and totals over a window
(the fleet page's figures, from the same selector), and its active recommendations by severity."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import sees_connection_detail, visible_servers
from advisor.selectors import recommendation_counts
from collectors.public import shown
from console.api.common import (
    PAGE_PARAMETERS,
    TABLE_RENDERERS,
    WINDOW_PARAMETERS,
    field_names,
    page_params,
    page_schema,
    paged,
    window_params,
)
from readtier import PlanningState, fleet_summary


class AdviceCounts(serializers.Serializer):
    critical = serializers.IntegerField()
    warning = serializers.IntegerField()
    info = serializers.IntegerField()


class FleetServer(serializers.Serializer):
    server_id = serializers.IntegerField()
    name = serializers.CharField()
    organization = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=["ok", "failing", "stale", "disabled", "never collected"])
    error_class = serializers.CharField(allow_blank=True)
    error_message = serializers.CharField(
        allow_blank=True,
        help_text="The console's sentence for the failure's class; console staff read libpq's own words instead.",
    )
    server_version_num = serializers.IntegerField(allow_null=True)
    extension_version = serializers.CharField(allow_blank=True)
    last_snapshot_at = serializers.DateTimeField(allow_null=True)
    snapshots = serializers.IntegerField(help_text="delta snapshots in the window")
    span_s = serializers.FloatField(help_text="seconds of the window the snapshots cover")
    calls_per_s = serializers.FloatField(allow_null=True)
    exec_ms_per_s = serializers.FloatField(allow_null=True)
    plan_ms_per_s = serializers.FloatField(allow_null=True, help_text="null: planning not tracked in the window")
    planning = serializers.ChoiceField(choices=[s.value for s in PlanningState])
    dealloc_per_s = serializers.FloatField(allow_null=True, help_text="null: unknown (before 14, or no data)")
    entries_peak = serializers.IntegerField(allow_null=True)
    entries_max = serializers.IntegerField(allow_null=True)
    recommendations = AdviceCounts(help_text="active recommendations by severity")


FleetPage = page_schema(
    FleetServer,
    "FleetPage",
    window_start=serializers.DateTimeField(),
    window_end=serializers.DateTimeField(),
)


class Fleet(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(
        operation_id="fleet_list",
        parameters=[
            *WINDOW_PARAMETERS,
            *PAGE_PARAMETERS,
            OpenApiParameter("organization", OpenApiTypes.INT, description="only this organization's servers"),
        ],
        responses=FleetPage,
    )
    def get(self, request):
        window = window_params(request)
        page, size = page_params(request)
        servers = visible_servers(request.user)
        if request.query_params.get("organization"):
            try:
                servers = servers.filter(organization_id=int(request.query_params["organization"]))
            except ValueError:
                raise exceptions.ValidationError({"organization": ["an organization id"]}) from None
        ids = list(servers.order_by("organization__name", "name").values_list("pk", flat=True))
        chosen = ids[(page - 1) * size : page * size]
        rows = fleet_summary(server_ids=chosen, window=window) if chosen else []
        counts = recommendation_counts(server_ids=chosen)
        results = []
        detail = sees_connection_detail(request.user)  # libpq's words: console staff only (collectors.errors)
        for r in rows:
            c = counts[r.server_id]
            item = {name: getattr(r, name) for name in field_names(FleetServer) if name != "recommendations"}
            item["recommendations"] = {"critical": c.critical, "warning": c.warning, "info": c.info}
            item["error_message"] = shown(r.error_class, r.error_message, detail=detail)
            results.append(item)
        # Plain dicts (FleetServer describes them in the schema): serializing 500 rows through DRF fields costs more
        # than reading them.
        body = paged(results, count=len(ids), page=page, page_size=size)
        return Response({**body, "window_start": window.start, "window_end": window.end})
