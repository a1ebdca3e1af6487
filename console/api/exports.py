"""/api/v1/exports/: audit exports — request one (DBA or admin of the organization; 202 and its status URL),
poll it and list them (any member), download its zip (DBA or admin; checked against its sha256 and recorded
in the audit log); and the audit JSON's schema. Built by the worker through exports.services, read
through exports.selectors."""

from __future__ import annotations

import json

from django.http import Http404
from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, negotiation, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import MANAGE_SERVERS, require_role, visible_organizations
from console.api.common import PAGE_PARAMETERS, JSONRenderer, api, field_names, page_of, page_schema
from console.api.errors import error_response
from console.downloads import zip_response
from exports.audit_data import SCHEMA_PATH
from exports.formats.bundle import FORMATS
from exports.models import AuditExport
from exports.selectors import ExportRow, audit_export, audit_exports
from exports.services import (
    ExportError,
    ExportNotReady,
    ExportQuota,
    audit_export_download,
    audit_export_request,
    export_window,
)
from exports.tasks import audit_export_build_task

ID_MAX = 2**63 - 1


class ExportIn(serializers.Serializer):
    organization = serializers.IntegerField(min_value=1, max_value=ID_MAX, help_text="the organization's id")
    servers = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=ID_MAX),
        required=False,
        allow_empty=True,
        help_text="server ids of that organization (default: all of them)",
    )
    window_start = serializers.DateTimeField(help_text="ISO 8601 with a UTC offset")
    window_end = serializers.DateTimeField(help_text="at most now: the window must have ended")
    formats = serializers.ListField(
        child=serializers.ChoiceField(choices=list(FORMATS)),
        required=False,
        allow_empty=False,
        help_text="default: all of them",
    )


class ExportOut(serializers.Serializer):
    id = serializers.IntegerField()
    organization_id = serializers.IntegerField()
    organization = serializers.CharField()
    requested_by = serializers.CharField(allow_null=True)
    server_ids = serializers.ListField(child=serializers.IntegerField())
    servers = serializers.ListField(child=serializers.CharField(), help_text="names of those still registered")
    window_start = serializers.DateTimeField()
    window_end = serializers.DateTimeField()
    formats = serializers.ListField(child=serializers.ChoiceField(choices=list(FORMATS)))
    status = serializers.ChoiceField(choices=AuditExport.Status.values)
    progress = serializers.IntegerField(min_value=0, max_value=100, help_text="percent")
    step = serializers.CharField(allow_blank=True, help_text="what the worker is doing now")
    error = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True, help_text="when a worker took it")
    finished_at = serializers.DateTimeField(allow_null=True)
    file_name = serializers.CharField(allow_blank=True)
    sha256 = serializers.CharField(allow_blank=True, help_text="of the zip, once done")
    size_bytes = serializers.IntegerField(allow_null=True)
    status_url = serializers.CharField()
    download_url = serializers.CharField(allow_null=True, help_text="null until done")


ExportPage = page_schema(ExportOut, "ExportPage")


class ErrorShape(serializers.Serializer):
    status = serializers.IntegerField()
    code = serializers.CharField()
    message = serializers.CharField()
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))


def _out(e: ExportRow) -> dict:
    names = [n for n in field_names(ExportOut) if n not in ("status_url", "download_url")]
    out = {n: getattr(e, n) for n in names}
    out["status_url"] = reverse("api-export", args=[e.id])
    out["download_url"] = reverse("api-export-download", args=[e.id]) if e.status == AuditExport.Status.DONE else None
    return out


def _organization_ids(user) -> list[int]:
    return list(visible_organizations(user).values_list("pk", flat=True))


def _visible(request, export_id: int) -> ExportRow:
    """The export if the caller is a member of its organization (any role reads its status), else 404."""
    found = audit_export(export_id=export_id, organization_ids=_organization_ids(request.user))
    if found is None:
        raise Http404("no such export")
    return found


class Exports(APIView):
    @extend_schema(
        operation_id="exports_list",
        parameters=PAGE_PARAMETERS,
        responses=ExportPage,
        description="The exports of your organizations, newest first (any member reads them; "
        "DBAs and admins request and download them).",
    )
    def get(self, request):
        rows = audit_exports(organization_ids=_organization_ids(request.user), limit=None)
        return page_of(rows, request, out=_out)

    @extend_schema(
        operation_id="export_create",
        request=ExportIn,
        responses={202: ExportOut},
        description="Queue an audit export of an organization's servers over a window that has ended; "
        "poll status_url until status is done (or failed), then fetch download_url.",
    )
    def post(self, request):
        if not isinstance(request.data, dict):
            raise exceptions.ValidationError({"non_field_errors": ["a JSON object is expected"]})
        s = ExportIn(data=request.data)
        s.is_valid(raise_exception=True)
        data = s.validated_data
        # As for a server's creation: an organization that is not yours is a field error; a viewer's, a 403.
        if not visible_organizations(request.user).filter(pk=data["organization"]).exists():
            raise exceptions.ValidationError({"organization": ["not one of your organizations"]})
        require_role(request.user, data["organization"], MANAGE_SERVERS)
        try:
            window = export_window(start=data["window_start"], end=data["window_end"])
            export = audit_export_request(
                organization_id=data["organization"],
                user=request.user,
                server_ids=data.get("servers") or None,
                window=window,
                formats=data.get("formats") or list(FORMATS),
                enqueue=audit_export_build_task.delay,
            )
        except ExportQuota as exc:
            raise exceptions.Throttled(detail=str(exc)) from None
        except ExportError as exc:
            raise exceptions.ValidationError({exc.field: [str(exc)]}) from None
        return Response(_out(_visible(request, export.pk)), status=status.HTTP_202_ACCEPTED)


class ExportView(APIView):
    @extend_schema(operation_id="export_read", responses=ExportOut)
    def get(self, request, export_id: int):
        return Response(_out(_visible(request, export_id)))


class JSONOnly(negotiation.DefaultContentNegotiation):
    """The download answers a zip or, for an error, the JSON error shape, whatever the Accept header says."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return JSONRenderer(), JSONRenderer.media_type


class ExportDownload(APIView):
    renderer_classes = [JSONRenderer]
    content_negotiation_class = JSONOnly

    @extend_schema(
        operation_id="export_download",
        responses={
            (200, "application/zip"): OpenApiTypes.BINARY,
            409: OpenApiResponse(ErrorShape, description="not built yet, failed, or its file is gone"),
        },
        description="The bundle (a zip: audit.pdf, audit.xlsx, csv/, audit.json, its schema, SHA256SUMS); its "
        "sha256 is in the X-Checksum-SHA256 header. Each download is recorded in the organization's audit log.",
    )
    def get(self, request, export_id: int):
        _visible(request, export_id)  # 404 for a stranger; the service refuses a viewer (403)
        try:
            found = audit_export_download(export_id=export_id, user=request.user)
        except ExportNotReady as exc:
            return error_response(status.HTTP_409_CONFLICT, "not_ready", str(exc))
        return zip_response(found)


class ExportSchema(APIView):
    @extend_schema(
        operation_id="export_json_schema",
        responses=OpenApiTypes.OBJECT,
        description="The JSON Schema (draft 2020-12) of audit.json in an export's bundle.",
    )
    def get(self, request):
        return Response(json.loads(SCHEMA_PATH.read_text()))


urlpatterns = [
    path("exports/", api(Exports.as_view()), name="api-exports"),
    path("exports/<int:export_id>/", api(ExportView.as_view()), name="api-export"),
    path("exports/<int:export_id>/download/", api(ExportDownload.as_view()), name="api-export-download"),
    path("schemas/audit-export.json", api(ExportSchema.as_view()), name="api-export-schema"),
]
