"""Server management: the list of servers (DBA and admin roles act on them; viewers see it read-only),
adding and editing one with a "test connection" check (collectors.connection_check, run by a worker:
collectors.queued_checks) before saving, enabling or disabling, and removing one with its history. The password
is write-only: no page ever renders it."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from accounts.access import (
    MANAGE_SERVERS,
    check_for,
    managed_organizations,
    require_role,
    sees_connection_detail,
    server_for,
    visible_servers,
)
from collectors.public import MONITORING_ROLE_SQL, CheckFinding, CheckReport, CheckState, check_enqueue, check_queue
from console import throttling
from console.forms import ServerForm
from console.services import server_delete
from console.sql_highlight import highlight
from console.views.common import is_fragment_request, render_page
from inventory.crypto import CredentialsError
from inventory.endpoint import Endpoint
from inventory.models import Server
from inventory.services import CONNECTION_FIELDS, PLANS_TRUST_FIELDS, server_create, server_update

FORM_TEMPLATE = "console/server_form.html"
LEVEL_BADGE = {"ok": "ok", "info": "new", "warning": "stale", "problem": "failing"}
STATUS_BADGE = {"ok": "ok", "failing": "failing", "disabled": "disabled", "never collected": "never"}


@dataclass(frozen=True)
class FindingRow:
    finding: CheckFinding
    badge: str  # the console.css badge class of its level
    fix_html: SafeString | None  # the fix, highlighted (escaped: it may quote names typed in the form)


@dataclass(frozen=True)
class ServerRow:
    server: Server
    status_badge: str
    can_manage: bool


def _role_sql() -> SafeString:
    return highlight(MONITORING_ROLE_SQL)


def servers(request: HttpRequest) -> HttpResponse:
    """Every server the user sees, with the actions their role allows."""
    managed = set(managed_organizations(request.user).values_list("pk", flat=True))
    rows = [
        ServerRow(s, STATUS_BADGE.get(s.status, "never"), s.organization_id in managed)
        for s in visible_servers(request.user).select_related("organization").order_by("organization__name", "name")
    ]
    context = {"rows": rows, "can_add": bool(managed), "role_sql": _role_sql()}
    return render_page(request, "console/manage_servers.html", context)


def server_add(request: HttpRequest) -> HttpResponse:
    organizations = managed_organizations(request.user).order_by("name")
    if not organizations.exists():
        raise PermissionDenied("adding a server needs the role dba or admin in an organization")
    return _server_form(request, organizations=organizations, server=None)


def server_edit(request: HttpRequest, server_id: int) -> HttpResponse:
    server = server_for(request.user, server_id)
    require_role(request.user, server.organization_id, MANAGE_SERVERS)
    return _server_form(request, organizations=managed_organizations(request.user).order_by("name"), server=server)


@require_POST
def server_enabled(request: HttpRequest, server_id: int) -> HttpResponse:
    """Enable (enabled=1) or disable (enabled=0) the collection of a server."""
    server = server_for(request.user, server_id)
    require_role(request.user, server.organization_id, MANAGE_SERVERS)
    enabled = request.POST.get("enabled") == "1"
    server_update(server=server, data={"enabled": enabled})
    state = "enabled: collections resume" if enabled else "disabled: no more collections until it is enabled"
    messages.success(request, f"{server.name} is {state}.")
    return redirect("manage-servers")


@require_POST
def server_remove(request: HttpRequest, server_id: int) -> HttpResponse:
    server = server_for(request.user, server_id)
    require_role(request.user, server.organization_id, MANAGE_SERVERS)
    name = server.name
    server_delete(server=server)
    messages.success(request, f"{name} was removed, with its whole history.")
    return redirect("manage-servers")


def _server_form(request: HttpRequest, *, organizations, server: Server | None) -> HttpResponse:
    """The add/edit page. POST with action=check queues a test of the typed connection (an htmx request gets
    the check's fragment only, which polls connection_check until the report is there); any other POST saves."""
    form = ServerForm(request.POST or None, organizations=organizations, server=server)
    context = {"form": form, "server": server, "role_sql": _role_sql(), "check": None}
    if request.method == "POST" and request.POST.get("action") == "check":
        if wait := throttling.wait_s(request, "check"):
            context["refused"] = f"Too many connection checks in a minute: try again in {throttling.wait_text(wait)}."
            # htmx swaps in only a successful answer: the page's fragment says why, with 200; 429 to anyone else.
            status = 200 if is_fragment_request(request) else 429
            return render_page(request, FORM_TEMPLATE, context, fragment="check", status=status)
        if form.is_valid():
            context.update(_check_context(_check(form), request.user))
        return render_page(request, FORM_TEMPLATE, context, fragment="check")
    if request.method == "POST" and form.is_valid():
        try:
            saved = _save(request, form, server)
        except ValidationError as exc:
            form.add_service_error(exc)
        else:
            return redirect("manage-servers") if saved else redirect("server-edit", server.pk)
    return render_page(request, FORM_TEMPLATE, context, status=400 if form.errors else 200)


def _save(request: HttpRequest, form: ServerForm, server: Server | None) -> bool:
    cd = form.cleaned_data
    if server is None:
        created = server_create(
            name=cd["name"],
            connection=form.connection(),
            organization_name=cd["organization"].name,
            interval_s=cd["interval_s"],
            cpu_count=cd["cpu_count"],
            tags=cd["tags"],
            ssl_root_cert=cd["ssl_root_cert"],
            require_scram=cd["require_scram"],
            plans_trusted_roles=cd["plans_trusted_roles"],
            plans_trusted_schemas=cd["plans_trusted_schemas"],
        )
        if not cd["enabled"]:
            server_update(server=created, data={"enabled": False})
        messages.success(request, f"{created.name} was added: the first snapshot is taken within its interval.")
        return True
    fields = (*CONNECTION_FIELDS, "name", "interval_s", "cpu_count", "tags", *PLANS_TRUST_FIELDS, "enabled")
    had_password = bool(server.password_encrypted)
    # A copy: on a refused change the page still shows the stored server, not the rejected values.
    updated = server_update(
        server=copy.copy(server),
        data={name: cd[name] for name in fields},
        password=cd["password"] or None,
        clear_password=cd["forget_password"],
    )
    if had_password and not updated.password_encrypted:
        why = (
            "as asked"
            if cd["forget_password"]
            else "because its organization, host, port, database, role, TLS or SCRAM settings changed"
        )
        messages.warning(
            request,
            f"The stored password of {updated.name} was cleared {why}: a password goes only to the server it was "
            "given for. Enter it again if this server needs one.",
        )
        messages.success(request, f"{updated.name} was saved.")
        return False  # back to the form, where the password can be typed again
    messages.success(request, f"{updated.name} was saved.")
    return True


def connection_check(request: HttpRequest, check_id: uuid.UUID) -> HttpResponse:
    """A queued check as it stands: the form's fragment for htmx (it polls again while the check runs), else
    a page of its own that reloads itself until the report is there."""
    context = _check_context(check_for(request.user, str(check_id)), request.user)
    if is_fragment_request(request):
        return render_page(request, FORM_TEMPLATE, {**context, "form": None}, fragment="check")
    return render_page(request, "console/connection_check.html", context)


def _check_context(check: CheckState, user) -> dict:
    report = check.report.seen_by(staff=sees_connection_detail(user)) if check.report is not None else None
    findings = _finding_rows(report) if report else []
    return {"check": check, "report": report, "password_note": check.note, "findings": findings}


def _check(form: ServerForm) -> CheckState:
    """Queue the check with the typed password, else the stored one if the connection goes where it was
    given for, and a note saying which."""
    cd = form.cleaned_data
    password, note = cd["password"] or None, ""
    server = form.server
    if password is None and server is not None and server.password_encrypted and not cd.get("forget_password"):
        if form.moves():
            note = (
                "Tested without a password: the stored one is sent only to the organization, host, port, database "
                "and role it was given for, with its TLS and SCRAM settings. Type it to test this connection."
            )
        else:
            try:
                password, note = server.get_password(), "Tested with the stored password."
            except CredentialsError:
                note = "The stored password cannot be decrypted (CREDENTIALS_KEY changed?): type it again."
    return check_queue(
        organization_id=cd["organization"].pk,
        server_id=server.pk if server is not None else None,
        endpoint=Endpoint.of(cd),
        password=password,
        note=note,
        enqueue=check_enqueue,
    )


def _finding_rows(report: CheckReport) -> list[FindingRow]:
    return [FindingRow(f, LEVEL_BADGE[f.level], highlight(f.fix) if f.fix else None) for f in report.findings]


urlpatterns = [
    path("manage/servers/", servers, name="manage-servers"),
    path("manage/servers/add/", server_add, name="server-add"),
    path("manage/servers/<int:server_id>/edit/", server_edit, name="server-edit"),
    path("manage/servers/<int:server_id>/enabled/", server_enabled, name="server-enabled"),
    path("manage/servers/<int:server_id>/remove/", server_remove, name="server-remove"),
    path("manage/servers/checks/<uuid:check_id>/", connection_check, name="connection-check"),
]
