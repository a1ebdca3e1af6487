"""/api/v1/ statements and series: the top statements of a server or an organization over a window, one
statement (totals, series, wait events of its query_id) and a server's series — from the same selectors as
the console's pages. Planning that was not tracked is null with `planning_tracked` false, never 0.

One module over 400 lines: the endpoints of one resource (statements and their series) with the serializers that are
their contract, next to the view that answers with them, as Django REST framework writes an API; the OpenAPI schema
is built from them together."""

from __future__ import annotations

from django.http import Http404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import server_for, visible_organization_ids, visible_organizations, visible_servers
from console.api.common import (
    PAGE_PARAMETERS,
    TABLE_RENDERERS,
    WINDOW_PARAMETERS,
    api,
    field_names,
    page_params,
    page_schema,
    paged,
    window_params,
)
from readtier import MAX_PAGE_SIZE as ACROSS_MAX
from readtier import MAX_PAGES as ACROSS_PAGES
from readtier import (
    ORDERS,
    RESOLUTIONS,
    SORT_KEYS,
    STATEMENT_RESOLUTIONS,
    Page,
    StatementFilters,
    WindowError,
    server_series,
    statement_detail_of,
    statement_owner,
    statement_series,
    statements_across,
    statements_in,
    top_statements,
    wait_events,
)

WAITS_BY_QUERY_FROM = 140000  # pg_stat_activity.query_id: PostgreSQL 14
FILTER_PARAMETERS = [
    OpenApiParameter("order_by", OpenApiTypes.STR, enum=list(ORDERS), description="descending (default total)"),
    OpenApiParameter("database", OpenApiTypes.STR, description="exact database name"),
    OpenApiParameter("user", OpenApiTypes.STR, description="exact user name"),
    OpenApiParameter("text", OpenApiTypes.STR, description="substring of the normalized text, taken literally"),
    OpenApiParameter("toplevel", OpenApiTypes.BOOL, description="only top-level (true) or nested (false)"),
    OpenApiParameter(
        "own",
        OpenApiTypes.BOOL,
        description="true: the console's own statements (its collections: run as its monitoring role and marked "
        "/* pgconsole <token> */) are listed too; default false, as on the console's pages",
    ),
]


class StatementRow(serializers.Serializer):
    statement_id = serializers.IntegerField()
    queryid = serializers.IntegerField()
    database = serializers.CharField(allow_blank=True)
    user = serializers.CharField(allow_blank=True)
    toplevel = serializers.BooleanField()
    own = serializers.BooleanField(
        help_text="run by the console to collect these statistics (as its monitoring role, marked "
        "/* pgconsole <token> */)"
    )
    query = serializers.CharField(allow_null=True, help_text="null: no text (see text_status)")
    text_status = serializers.ChoiceField(choices=["stored", "evicted", "not_visible", "unavailable", "pending"])
    calls = serializers.IntegerField()
    exec_ms = serializers.FloatField()
    plan_ms = serializers.FloatField(allow_null=True, help_text="null: planning not tracked")
    plans = serializers.IntegerField(allow_null=True)
    total_ms = serializers.FloatField()
    mean_exec_ms = serializers.FloatField(allow_null=True)
    mean_plan_ms = serializers.FloatField(allow_null=True)
    plan_share = serializers.FloatField(allow_null=True)
    rows = serializers.IntegerField()
    shared_blks_hit = serializers.IntegerField()
    shared_blks_read = serializers.IntegerField()
    hit_ratio = serializers.FloatField(allow_null=True)
    temp_blks = serializers.IntegerField()
    io_ms = serializers.FloatField()
    wal_bytes = serializers.IntegerField()


class ServerStatementRow(StatementRow):
    server_id = serializers.IntegerField()
    server = serializers.CharField()


TopPage = page_schema(
    StatementRow,
    "TopPage",
    order_by=serializers.CharField(),
    window_start=serializers.DateTimeField(),
    window_end=serializers.DateTimeField(),
    read_start=serializers.DateTimeField(help_text="the range really read (edges move out where raw data expired)"),
    read_end=serializers.DateTimeField(),
    planning_tracked=serializers.BooleanField(help_text="track_planning was on for some of the window"),
    planning=serializers.CharField(help_text="tracked | partly tracked | not tracked | no data"),
)


AcrossPage = page_schema(
    ServerStatementRow,
    "AcrossPage",
    order_by=serializers.CharField(),
    window_start=serializers.DateTimeField(),
    window_end=serializers.DateTimeField(),
    planning_tracked=serializers.BooleanField(),
)


def _row(s) -> dict:
    names = field_names(StatementRow)
    return {n: getattr(s, n) for n in names}


def _filters(request) -> tuple[str, StatementFilters]:
    q = request.query_params
    order = q.get("order_by") or "total"
    if order not in ORDERS:
        raise exceptions.ValidationError({"order_by": [f"unknown order {order!r}: one of {', '.join(ORDERS)}"]})
    toplevel, own = q.get("toplevel"), q.get("own")
    for name, value in (("toplevel", toplevel), ("own", own)):
        if value not in (None, "", "true", "false"):
            raise exceptions.ValidationError({name: ["true or false"]})
    filters = StatementFilters(
        database=q.get("database") or None,
        user=q.get("user") or None,
        text=q.get("text") or None,
        toplevel=None if not toplevel else toplevel == "true",
        hide_own=own != "true",
    )
    return order, filters


class ServerStatements(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(
        operation_id="server_statements",
        parameters=[*WINDOW_PARAMETERS, *FILTER_PARAMETERS, *PAGE_PARAMETERS],
        responses=TopPage,
    )
    def get(self, request, server_id: int):
        server = server_for(request.user, server_id)
        window = window_params(request)
        order, filters = _filters(request)
        page, size = page_params(request)
        top = top_statements(server_id=server.pk, window=window, order=order, filters=filters, page=Page(page, size))
        body = paged([_row(s) for s in top.rows], count=top.total_count, page=page, page_size=size)
        return Response(
            {
                **body,
                "order_by": order,
                "window_start": window.start,
                "window_end": window.end,
                "read_start": top.read_start,
                "read_end": top.read_end,
                "planning_tracked": top.planning.tracked,
                "planning": top.planning.state,
            }
        )


class OrganizationStatements(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(
        operation_id="organization_statements",
        parameters=[*WINDOW_PARAMETERS, *FILTER_PARAMETERS, *PAGE_PARAMETERS],
        responses=AcrossPage,
    )
    def get(self, request, organization_id: int):
        if not visible_organizations(request.user).filter(pk=organization_id).exists():
            raise Http404("no such organization")
        window = window_params(request)
        order, filters = _filters(request)
        if order not in SORT_KEYS:
            raise exceptions.ValidationError({"order_by": [f"across servers: one of {', '.join(SORT_KEYS)}"]})
        page, size = page_params(request)
        if page > ACROSS_PAGES or page * size > ACROSS_MAX:
            raise exceptions.ValidationError({"page": [f"across servers, only the first {ACROSS_MAX} are listed"]})
        servers = dict(visible_servers(request.user).filter(organization_id=organization_id).values_list("pk", "name"))
        across = statements_across(
            server_ids=list(servers), window=window, order=order, filters=filters, page=Page(page, size)
        )
        rows = [{**_row(r.statement), "server_id": r.server_id, "server": servers[r.server_id]} for r in across.rows]
        body = paged(rows, count=across.total_count, page=page, page_size=size)
        return Response(
            {
                **body,
                "order_by": order,
                "window_start": window.start,
                "window_end": window.end,
                "planning_tracked": across.planning_tracked,
            }
        )


def statement_of(request, statement_id: int, selector=statement_detail_of):
    """The statement (statement_detail_of, or statement_owner where only whose it is matters) and its server,
    a 404 unless the caller sees it."""
    user = request.user
    organizations = visible_organization_ids(user)
    try:
        found = selector(statement_id=statement_id, organization_ids=organizations)
    except LookupError:
        raise Http404("no such statement") from None
    return found, server_for(user, found.server_id)


class StatementOut(serializers.Serializer):
    statement_id = serializers.IntegerField()
    server_id = serializers.IntegerField()
    queryid = serializers.IntegerField()
    database = serializers.CharField(allow_blank=True)
    user = serializers.CharField(allow_blank=True)
    toplevel = serializers.BooleanField()
    query = serializers.CharField(allow_null=True)
    query_truncated = serializers.BooleanField()
    text_status = serializers.CharField()
    first_seen_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField(allow_null=True)
    window_start = serializers.DateTimeField()
    window_end = serializers.DateTimeField()
    totals = StatementRow(allow_null=True, help_text="over the window; null: it did not run in it")


class StatementView(APIView):
    @extend_schema(operation_id="statement_read", parameters=WINDOW_PARAMETERS, responses=StatementOut)
    def get(self, request, statement_id: int):
        detail, server = statement_of(request, statement_id)
        window = window_params(request)
        totals = statements_in(server_id=server.pk, window=window, statement_ids=[detail.statement_id])
        s = totals.get(detail.statement_id)
        return Response(
            {
                "statement_id": detail.statement_id,
                "server_id": detail.server_id,
                "queryid": detail.queryid,
                "database": detail.database,
                "user": detail.user,
                "toplevel": detail.toplevel,
                "query": detail.query,
                "query_truncated": detail.query_truncated,
                "text_status": detail.text_status,
                "first_seen_at": detail.first_seen_at,
                "last_seen_at": detail.last_seen_at,
                "window_start": window.start,
                "window_end": window.end,
                "totals": _row(s) if s else None,
            }
        )


def _resolution(request, allowed: tuple[str, ...] = RESOLUTIONS) -> str | None:
    asked = request.query_params.get("resolution") or None
    if asked is not None and asked not in allowed:
        raise exceptions.ValidationError({"resolution": [f"one of {', '.join(allowed)}"]})
    return asked


RESOLUTION_PARAMETER = OpenApiParameter(
    "resolution", OpenApiTypes.STR, enum=list(RESOLUTIONS), description="default: chosen from the window"
)
STATEMENT_RESOLUTION_PARAMETER = OpenApiParameter(
    "resolution", OpenApiTypes.STR, enum=list(STATEMENT_RESOLUTIONS), description="default: chosen from the window"
)


class StatementPointOut(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    span_s = serializers.FloatField(allow_null=True, help_text="null: no data (a gap)")
    planning_tracked = serializers.BooleanField(allow_null=True)
    calls = serializers.IntegerField(allow_null=True)
    calls_per_s = serializers.FloatField(allow_null=True)
    mean_exec_ms = serializers.FloatField(allow_null=True)
    mean_plan_ms = serializers.FloatField(allow_null=True, help_text="null where planning was not tracked")
    rows_per_call = serializers.FloatField(allow_null=True)
    hit_ratio = serializers.FloatField(allow_null=True)
    temp_blks = serializers.IntegerField(allow_null=True)


class StatementSeriesOut(serializers.Serializer):
    statement_id = serializers.IntegerField()
    resolution = serializers.CharField()
    window_start = serializers.DateTimeField()
    window_end = serializers.DateTimeField()
    points = StatementPointOut(many=True)


def _points(points, serializer) -> list[dict]:
    names = field_names(serializer)
    return [{n: getattr(p, n) for n in names} for p in points]


class StatementSeriesView(APIView):
    @extend_schema(
        operation_id="statement_series",
        parameters=[*WINDOW_PARAMETERS, STATEMENT_RESOLUTION_PARAMETER],
        responses=StatementSeriesOut,
    )
    def get(self, request, statement_id: int):
        owner, _ = statement_of(request, statement_id, statement_owner)
        window = window_params(request)
        try:
            resolution = _resolution(request, STATEMENT_RESOLUTIONS)
            series = statement_series(statement_id=owner.statement_id, window=window, resolution=resolution)
        except WindowError as exc:
            raise exceptions.ValidationError({"resolution": [str(exc)]}) from None
        return Response(
            {
                "statement_id": owner.statement_id,
                "resolution": series.resolution,
                "window_start": window.start,
                "window_end": window.end,
                "points": _points(series.points, StatementPointOut),
            }
        )


class WaitRow(serializers.Serializer):
    event = serializers.CharField()
    event_type = serializers.CharField(allow_null=True)
    session_s = serializers.FloatField()
    active_sessions = serializers.FloatField(allow_null=True)
    share = serializers.FloatField(allow_null=True)


class WaitsOut(serializers.Serializer):
    statement_id = serializers.IntegerField()
    available = serializers.BooleanField(help_text="wait events by query_id need PostgreSQL 14")
    reason = serializers.CharField(allow_blank=True)
    window_start = serializers.DateTimeField()
    window_end = serializers.DateTimeField()
    span_s = serializers.FloatField(allow_null=True)
    results = WaitRow(many=True)


class StatementWaitsView(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(operation_id="statement_waits", parameters=WINDOW_PARAMETERS, responses=WaitsOut)
    def get(self, request, statement_id: int):
        owner, server = statement_of(request, statement_id, statement_owner)
        window = window_params(request)
        base = {"statement_id": owner.statement_id, "window_start": window.start, "window_end": window.end}
        version = server.server_version_num
        if version is None or version < WAITS_BY_QUERY_FROM:
            why = "the server's version is not known yet" if version is None else f"the server runs {version}"
            return Response(
                {
                    **base,
                    "available": False,
                    "reason": f"wait events by query need PostgreSQL 14 ({why})",
                    "span_s": None,
                    "results": [],
                }
            )
        waits = wait_events(server_id=server.pk, window=window, statement_id=owner.statement_id)
        return Response(
            {**base, "available": True, "reason": "", "span_s": waits.span_s, "results": _points(waits.rows, WaitRow)}
        )


class ServerPointOut(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    span_s = serializers.FloatField(allow_null=True, help_text="null: no data (a gap)")
    planning = serializers.CharField(allow_null=True)
    calls_per_s = serializers.FloatField(allow_null=True)
    exec_ms_per_s = serializers.FloatField(allow_null=True)
    plan_ms_per_s = serializers.FloatField(allow_null=True, help_text="null where planning was not tracked")
    dealloc_per_s = serializers.FloatField(allow_null=True, help_text="null: unknown (before 14)")
    entries_peak = serializers.IntegerField(allow_null=True)
    entries_max = serializers.IntegerField(allow_null=True)
    hit_ratio = serializers.FloatField(allow_null=True)
    active_sessions = serializers.DictField(child=serializers.FloatField(), help_text="wait event -> sessions")


class ServerSeriesOut(serializers.Serializer):
    server_id = serializers.IntegerField()
    resolution = serializers.CharField()
    window_start = serializers.DateTimeField()
    window_end = serializers.DateTimeField()
    events = serializers.ListField(child=serializers.CharField(), help_text="wait events charted, heaviest first")
    points = ServerPointOut(many=True)


class ServerSeriesView(APIView):
    @extend_schema(
        operation_id="server_series", parameters=[*WINDOW_PARAMETERS, RESOLUTION_PARAMETER], responses=ServerSeriesOut
    )
    def get(self, request, server_id: int):
        server = server_for(request.user, server_id)
        window = window_params(request)
        try:
            series = server_series(server_id=server.pk, window=window, resolution=_resolution(request))
        except WindowError as exc:
            raise exceptions.ValidationError({"resolution": [str(exc)]}) from None
        return Response(
            {
                "server_id": server.pk,
                "resolution": series.resolution,
                "window_start": window.start,
                "window_end": window.end,
                "events": series.events,
                "points": _points(series.points, ServerPointOut),
            }
        )


urlpatterns = [
    path("servers/<int:server_id>/statements/", api(ServerStatements.as_view()), name="api-server-statements"),
    path("servers/<int:server_id>/series/", api(ServerSeriesView.as_view()), name="api-server-series"),
    path(
        "organizations/<int:organization_id>/statements/",
        api(OrganizationStatements.as_view()),
        name="api-organization-statements",
    ),
    path("statements/<int:statement_id>/", api(StatementView.as_view()), name="api-statement"),
    path("statements/<int:statement_id>/series/", api(StatementSeriesView.as_view()), name="api-statement-series"),
    path("statements/<int:statement_id>/waits/", api(StatementWaitsView.as_view()), name="api-statement-waits"),
]
