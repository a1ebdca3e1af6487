"""/api/v1/servers/: the caller's servers — list, create, read, update, delete, test the connection and
collect now (each 202 and something to poll), their snapshots and recent collection errors. Writes go through
inventory.services and console.services (DBA or admin of the server's organization); the monitoring
password is write-only: never in a response, cleared when organization, host, port, user, database, sslmode,
ssl_root_cert or require_scram change without it. New servers require TLS (sslmode require) and SCRAM.

One module over 400 lines: the endpoints of one resource (a server and what is asked of it: checks, collections, its
snapshots and errors) with the serializers that are their contract, next to the view that answers with them, as
Django REST framework writes an API; the OpenAPI schema is built from them together."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import datetime

from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import (
    MANAGE_SERVERS,
    check_for,
    require_role,
    sees_connection_detail,
    server_for,
    visible_organizations,
    visible_servers,
)
from collectors.public import CheckState, check_enqueue, check_queue, collect_tracked, shown, tracked
from console.api.common import (
    PAGE_PARAMETERS,
    TABLE_RENDERERS,
    WINDOW_PARAMETERS,
    api,
    field_names,
    page_of,
    page_params,
    page_schema,
    paged,
    window_params,
)
from console.api.throttling import page_rate
from console.services import server_delete
from history.public import HELP, Column, SnapshotFacts, snapshot_columns
from inventory.catalog_names import MAX_NAMES, NAME_MAX_BYTES
from inventory.connection import Connection
from inventory.crypto import CredentialsError
from inventory.models import Server
from inventory.services import server_create, server_update
from readtier import Page, latest_snapshot, recent_errors, server_status, snapshot_page, version_text

SSLMODES = [c for c, _ in Server.SslMode.choices]
_NAMES = (
    "names as the catalog spells them: case-sensitive, not quoted, blanks kept; at most "
    f"{MAX_NAMES}, each at most {NAME_MAX_BYTES} bytes in UTF-8; duplicates dropped"
)
TRUSTED_ROLES_HELP = (
    "roles whose functions, operators, casts and checks may run while the console plans a statement, besides "
    f"PostgreSQL's, the extensions' and the superusers' ({_NAMES})"
)
TRUSTED_SCHEMAS_HELP = (
    "schemas whose functions, operators, casts and checks may run while the console plans a statement, whoever "
    f"owns them ({_NAMES})"
)


class ServerOut(serializers.Serializer):
    id = serializers.IntegerField()
    organization_id = serializers.IntegerField()
    organization = serializers.CharField()
    name = serializers.CharField()
    host = serializers.CharField()
    port = serializers.IntegerField()
    database = serializers.CharField()
    user = serializers.CharField()
    sslmode = serializers.ChoiceField(choices=SSLMODES)
    ssl_root_cert = serializers.CharField(
        allow_blank=True, help_text="the CA certificate(s) the server's certificate is verified with (PEM), or system"
    )
    require_scram = serializers.BooleanField(help_text="the password is sent only through SCRAM-SHA-256")
    warnings = serializers.ListField(
        child=serializers.CharField(), help_text="what the connection settings leave open (weak sslmode, no SCRAM)"
    )
    has_password = serializers.BooleanField(help_text="a password is stored (it is never returned)")
    enabled = serializers.BooleanField()
    interval_s = serializers.IntegerField()
    cpu_count = serializers.IntegerField(allow_null=True)
    tags = serializers.ListField(child=serializers.CharField())
    plans_trusted_roles = serializers.ListField(child=serializers.CharField(), help_text=TRUSTED_ROLES_HELP)
    plans_trusted_schemas = serializers.ListField(child=serializers.CharField(), help_text=TRUSTED_SCHEMAS_HELP)
    status = serializers.ChoiceField(choices=["ok", "failing", "stale", "disabled", "never collected"])
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    last_success_at = serializers.DateTimeField(allow_null=True)
    last_error_class = serializers.CharField(allow_blank=True)
    last_error_message = serializers.CharField(
        allow_blank=True,
        help_text="The console's sentence for the failure's class; console staff read libpq's own words instead.",
    )
    consecutive_failures = serializers.IntegerField()
    server_version = serializers.CharField(allow_null=True)
    extension_version = serializers.CharField(allow_blank=True)


ServerPage = page_schema(ServerOut, "ServerPage")


class ServerIn(serializers.Serializer):
    organization = serializers.IntegerField(help_text="the organization's id (create only)")
    name = serializers.CharField(max_length=200)
    host = serializers.CharField(max_length=255)
    port = serializers.IntegerField(min_value=1, max_value=65535, default=5432)
    database = serializers.CharField(max_length=255, default="postgres")
    user = serializers.CharField(max_length=255)
    password = serializers.CharField(
        write_only=True, required=False, allow_blank=True, trim_whitespace=False, style={"input_type": "password"}
    )
    sslmode = serializers.ChoiceField(choices=SSLMODES, default="require")
    ssl_root_cert = serializers.CharField(
        default="",
        allow_blank=True,
        trim_whitespace=False,
        max_length=64 * 1024,
        help_text="for verify-full / verify-ca: the CA certificate(s) in PEM, or system for the trusted roots",
    )
    require_scram = serializers.BooleanField(default=True)
    enabled = serializers.BooleanField(default=True)
    interval_s = serializers.IntegerField(min_value=5, default=60)
    cpu_count = serializers.IntegerField(min_value=1, allow_null=True, required=False)
    tags = serializers.ListField(child=serializers.CharField(max_length=50), required=False)
    # Checked by inventory.catalog_names (through the services), so that every writer says the same: a name is
    # kept as sent, blanks included, as the catalog may hold it.
    plans_trusted_roles = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        help_text=TRUSTED_ROLES_HELP,
    )
    plans_trusted_schemas = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        help_text=TRUSTED_SCHEMAS_HELP,
    )


class ServerPatch(ServerIn):
    """PUT and PATCH (PATCH: only the fields sent, no defaults filled in); a server keeps its organization."""

    organization = None


def _out(s: Server, user, now=None) -> dict:
    from django.utils import timezone

    return {
        "id": s.pk,
        "organization_id": s.organization_id,
        "organization": s.organization.name,
        "name": s.name,
        **asdict(s.endpoint),
        "warnings": s.tls_warnings,
        "has_password": bool(s.password_encrypted),
        "enabled": s.enabled,
        "interval_s": s.interval_s,
        "cpu_count": s.cpu_count,
        "tags": list(s.tags or []),
        "plans_trusted_roles": list(s.plans_trusted_roles),
        "plans_trusted_schemas": list(s.plans_trusted_schemas),
        "status": server_status(s, now or timezone.now()),
        "last_attempt_at": s.last_attempt_at,
        "last_success_at": s.last_success_at,
        "last_error_class": s.last_error_class,
        # libpq's words and addresses for console staff, the console's sentence for the class for everyone else
        "last_error_message": shown(s.last_error_class, s.last_error_message, detail=sees_connection_detail(user)),
        "consecutive_failures": s.consecutive_failures,
        "server_version": version_text(s.server_version_num),
        "extension_version": s.extension_version,
    }


def _valid(serializer_class, request, **kwargs) -> dict:
    if not isinstance(request.data, dict):
        raise exceptions.ValidationError({"non_field_errors": ["a JSON object is expected"]})
    s = serializer_class(data=request.data, **kwargs)
    s.is_valid(raise_exception=True)
    return dict(s.validated_data)


def _django_error(exc: DjangoValidationError) -> exceptions.ValidationError:
    if hasattr(exc, "error_dict"):
        return exceptions.ValidationError({k: [str(m) for m in v] for k, v in exc.message_dict.items()})
    return exceptions.ValidationError({"non_field_errors": exc.messages})


def _managed(request, server_id: int) -> Server:
    server = server_for(request.user, server_id)
    require_role(request.user, server.organization_id, MANAGE_SERVERS)
    return server


class Servers(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(
        operation_id="servers_list",
        parameters=[
            OpenApiParameter("organization", OpenApiTypes.INT),
            OpenApiParameter("tag", OpenApiTypes.STR),
            *PAGE_PARAMETERS,
        ],
        responses=ServerPage,
    )
    def get(self, request):
        servers = visible_servers(request.user).select_related("organization").order_by("organization__name", "name")
        org = request.query_params.get("organization")
        if org:
            if not org.isdigit():
                raise exceptions.ValidationError({"organization": ["an organization id"]})
            servers = servers.filter(organization_id=int(org))
        rows = [_out(s, request.user) for s in servers]
        if request.query_params.get("tag"):
            rows = [r for r in rows if request.query_params["tag"] in r["tags"]]
        return page_of(rows, request)

    @extend_schema(operation_id="servers_create", request=ServerIn, responses={201: ServerOut})
    def post(self, request):
        data = _valid(ServerIn, request)
        org = visible_organizations(request.user).filter(pk=data.pop("organization")).first()
        if org is None:
            raise exceptions.ValidationError({"organization": ["not one of your organizations"]})
        require_role(request.user, org.pk, MANAGE_SERVERS)
        try:
            server = server_create(
                name=data["name"],
                connection=Connection.of(data),
                organization_name=org.name,
                interval_s=data["interval_s"],
                cpu_count=data.get("cpu_count"),
                tags=data.get("tags") or [],
                ssl_root_cert=data["ssl_root_cert"],
                require_scram=data["require_scram"],
                plans_trusted_roles=data.get("plans_trusted_roles"),
                plans_trusted_schemas=data.get("plans_trusted_schemas"),
            )
            if not data["enabled"]:
                server = server_update(server=server, data={"enabled": False})
        except DjangoValidationError as exc:
            raise _django_error(exc) from None
        return Response(_out(server, request.user), status=status.HTTP_201_CREATED)


class ServerView(APIView):
    @extend_schema(operation_id="server_read", responses=ServerOut)
    def get(self, request, server_id: int):
        return Response(_out(server_for(request.user, server_id), request.user))

    def _update(self, request, server_id: int, *, partial: bool):
        server = _managed(request, server_id)
        # partial: only the fields sent (a default filled in would look like a move and clear the password).
        data = _valid(ServerPatch, request, partial=partial)
        data.pop("organization", None)
        password = data.pop("password", None)
        try:
            server = server_update(server=server, data=data, password=password or None)
        except DjangoValidationError as exc:
            raise _django_error(exc) from None
        return Response(_out(server, request.user))

    @extend_schema(
        operation_id="server_update",
        request=ServerPatch,
        responses=ServerOut,
        description="All fields. organization, host, port, user, database, sslmode, ssl_root_cert or "
        "require_scram changed without a password: the stored password is cleared (never sent to the new "
        "destination).",
    )
    def put(self, request, server_id: int):
        return self._update(request, server_id, partial=False)

    @extend_schema(operation_id="server_partial_update", request=ServerPatch, responses=ServerOut)
    def patch(self, request, server_id: int):
        return self._update(request, server_id, partial=True)

    @extend_schema(operation_id="server_delete", responses={204: None})
    def delete(self, request, server_id: int):
        server_delete(server=_managed(request, server_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class FindingOut(serializers.Serializer):
    level = serializers.CharField()
    topic = serializers.CharField()
    text = serializers.CharField()
    fix = serializers.CharField(allow_blank=True, help_text="the exact SQL or configuration line")
    detail = serializers.CharField(
        allow_blank=True, help_text="libpq's or the server's own words (console staff only; empty otherwise)"
    )


class CheckOut(serializers.Serializer):
    target = serializers.CharField(help_text="user@host:port/database (never the password)")
    connected = serializers.BooleanField()
    failure = serializers.CharField(allow_blank=True)
    server_version = serializers.CharField(allow_blank=True)
    extension_version = serializers.CharField(allow_null=True)
    preloaded = serializers.BooleanField(allow_null=True)
    reads_all_stats = serializers.BooleanField(allow_null=True)
    reads_all_data = serializers.BooleanField(
        allow_null=True, help_text="pg_read_all_data (14+): plans of statements on any table; null on 13"
    )
    findings = FindingOut(many=True)
    elapsed_ms = serializers.FloatField(
        allow_null=True, help_text="how long the check took (null for a failed connection but to console staff)"
    )


class CheckTaskOut(serializers.Serializer):
    check_id = serializers.CharField()
    server_id = serializers.IntegerField(allow_null=True)
    status = serializers.ChoiceField(
        choices=["queued", "running", "done", "lost"],
        help_text="queued, running (a worker is connecting), done (the result is there), lost (never ran: see problem)",
    )
    status_url = serializers.CharField()
    problem = serializers.CharField(allow_blank=True, help_text="why a lost check did not run")
    result = CheckOut(allow_null=True, help_text="once done")


def _check_out(check: CheckState, user) -> dict:
    r = check.report.seen_by(staff=sees_connection_detail(user)) if check.report is not None else None
    result = None
    if r is not None:
        result = {n: getattr(r, n) for n in field_names(CheckOut)}
        result["findings"] = [{n: getattr(f, n) for n in field_names(FindingOut)} for f in r.findings]
    return {
        "check_id": check.check_id,
        "server_id": check.server_id,
        "status": check.status,
        "status_url": reverse("api-check", args=[check.check_id]),
        "problem": check.problem,
        "result": result,
    }


class TestConnection(APIView):
    @extend_schema(
        operation_id="server_test",
        request=None,
        responses={202: CheckTaskOut},
        description="Queues a check of the stored connection, run by a worker within the collector's deadline "
        "(COLLECTOR_CONNECT_TIMEOUT_S + COLLECTOR_SNAPSHOT_TIMEOUT_S): poll status_url until the status is done "
        "(or lost).",
    )
    def post(self, request, server_id: int):
        s = _managed(request, server_id)
        page_rate(request, "check", "connection checks in a minute")
        try:
            password = s.get_password()
        except CredentialsError:
            raise exceptions.ValidationError(
                {"password": ["the stored password cannot be decrypted (CREDENTIALS_KEY changed?): set it again"]}
            ) from None
        check = check_queue(
            organization_id=s.organization_id,
            server_id=s.pk,
            endpoint=s.endpoint,
            password=password,
            enqueue=check_enqueue,
        )
        return Response(_check_out(check, request.user), status=status.HTTP_202_ACCEPTED)


class CheckView(APIView):
    @extend_schema(operation_id="check_read", responses=CheckTaskOut)
    def get(self, request, check_id: uuid.UUID):
        return Response(_check_out(check_for(request.user, str(check_id)), request.user))


class TaskOut(serializers.Serializer):
    task_id = serializers.CharField()
    server_id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["queued", "running", "succeeded", "failed"])
    status_url = serializers.CharField()
    result = serializers.DictField(allow_null=True, help_text="ok, kind, error_code once it ran")


def task_out(task_id: str, data: dict) -> dict:
    url = reverse("api-task", args=[task_id])
    return {
        "task_id": task_id,
        "server_id": data["server_id"],
        "status": data["status"],
        "status_url": url,
        "result": data.get("result"),
    }


class CollectNow(APIView):
    @extend_schema(operation_id="server_collect", request=None, responses={202: TaskOut})
    def post(self, request, server_id: int):
        server = _managed(request, server_id)
        task_id = collect_tracked(server.pk, expires_s=max(server.interval_s, 60))
        return Response(task_out(task_id, tracked(task_id)), status=status.HTTP_202_ACCEPTED)


class TaskView(APIView):
    @extend_schema(operation_id="task_read", responses=TaskOut)
    def get(self, request, task_id: uuid.UUID):
        task_id = str(task_id)
        data = tracked(task_id)
        if data is None or not visible_servers(request.user).filter(pk=data["server_id"]).exists():
            raise exceptions.NotFound("no such task (or it ended more than an hour ago)")
        return Response(task_out(task_id, data))


def _snapshot_out_field(column: Column) -> serializers.Field:
    kind = {
        datetime: serializers.DateTimeField,
        float: serializers.FloatField,
        int: serializers.IntegerField,
        bool: serializers.BooleanField,
        str: serializers.CharField,
    }[column.type]
    options = {"allow_null": True} if column.null else {}
    if HELP in column.metadata:
        options["help_text"] = column.metadata[HELP]
    return kind(**options)


def _snapshot_out_fields() -> dict[str, serializers.Field]:
    """One field per column of the snapshot's declaration (history.snapshot_facts), and its rate of
    deallocations beside the count."""
    out = {}
    for column in snapshot_columns():
        out[column.name] = _snapshot_out_field(column)
        if column.name == "dealloc_delta":
            out["dealloc_per_s"] = serializers.FloatField(allow_null=True)
    return out


SnapshotOut = type("SnapshotOut", (serializers.Serializer,), {"__module__": __name__, **_snapshot_out_fields()})


class SnapshotPageOut(serializers.Serializer):
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    page_size = serializers.IntegerField()
    pages = serializers.IntegerField()
    results = SnapshotOut(many=True)


def _snapshot(row: SnapshotFacts) -> dict:
    return {n: getattr(row, n) for n in field_names(SnapshotOut)}


class Snapshots(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(
        operation_id="server_snapshots",
        parameters=[*WINDOW_PARAMETERS, *PAGE_PARAMETERS],
        responses=SnapshotPageOut,
        description="Newest first; the whole history unless a window is given.",
    )
    def get(self, request, server_id: int):
        server = server_for(request.user, server_id)
        q = request.query_params
        window = window_params(request) if any(q.get(k) for k in ("from", "to", "since")) else None
        page, size = page_params(request)
        found = snapshot_page(server_id=server.pk, window=window, page=Page(page, size))
        return Response(paged([_snapshot(r) for r in found.rows], count=found.total_count, page=page, page_size=size))


class LatestSnapshot(APIView):
    @extend_schema(operation_id="server_snapshot_latest", responses=SnapshotOut)
    def get(self, request, server_id: int):
        row = latest_snapshot(server_id=server_for(request.user, server_id).pk)
        if row is None:
            raise exceptions.NotFound("no snapshot yet")
        return Response(_snapshot(row))


class ErrorOut(serializers.Serializer):
    at = serializers.DateTimeField()
    error_class = serializers.CharField(help_text="unreachable, auth_failed, timeout, ...")
    message = serializers.CharField()


ErrorPage = page_schema(ErrorOut, "ErrorPage")


class Errors(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(
        operation_id="server_errors",
        parameters=PAGE_PARAMETERS,
        responses=ErrorPage,
        description="The latest failed collections, newest first (the collector keeps 50).",
    )
    def get(self, request, server_id: int):
        server = server_for(request.user, server_id)
        rows = [
            {"at": e.at, "error_class": e.error_class, "message": e.message}
            for e in recent_errors(server_id=server.pk, limit=50)
        ]
        return page_of(rows, request)


urlpatterns = [
    path("servers/", api(Servers.as_view()), name="api-servers"),
    path("servers/<int:server_id>/", api(ServerView.as_view()), name="api-server"),
    path("servers/<int:server_id>/test/", api(TestConnection.as_view()), name="api-server-test"),
    path("servers/<int:server_id>/collect/", api(CollectNow.as_view()), name="api-server-collect"),
    path("servers/<int:server_id>/snapshots/", api(Snapshots.as_view()), name="api-server-snapshots"),
    path("servers/<int:server_id>/snapshots/latest/", api(LatestSnapshot.as_view()), name="api-server-snapshot-latest"),
    path("servers/<int:server_id>/errors/", api(Errors.as_view()), name="api-server-errors"),
    path("tasks/<uuid:task_id>/", api(TaskView.as_view()), name="api-task"),
    path("checks/<uuid:check_id>/", api(CheckView.as_view()), name="api-check"),
]
