"""An organization's audit exports (DBA and admin members; a viewer gets a 403, anyone else a 404): request
one (servers, a window that has ended, formats), follow its progress (the list polls itself with htmx while
one is queued or running), download it (checked and recorded), and read the audit log."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.utils import timezone

from accounts.access import MANAGE_SERVERS, organization_for, require_role
from console.downloads import zip_response
from console.views.common import render_page
from exports.formats.bundle import FORMATS
from exports.selectors import audit_export, audit_exports, audit_log
from exports.services import (
    ExportError,
    ExportNotReady,
    audit_export_download,
    audit_export_request,
    export_window,
)
from exports.tasks import audit_export_build_task
from inventory.models import Organization

FORMAT_LABELS = {"pdf": "PDF report", "xlsx": "XLSX workbook", "csv": "CSV files", "json": "JSON (with its schema)"}
LOCAL = "%Y-%m-%dT%H:%M"  # what <input type="datetime-local"> sends and shows


class ExportForm(forms.Form):
    servers = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, help_text="None ticked: every server of the organization."
    )
    # Read in the user's time zone (the middleware activates it), stored in UTC.
    window_start = forms.DateTimeField(
        label="From", widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL)
    )
    window_end = forms.DateTimeField(
        label="To",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL),
        help_text="The window must have ended: its figures no longer change.",
    )
    formats = forms.MultipleChoiceField(choices=list(FORMAT_LABELS.items()), widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args, organization: Organization, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["servers"].choices = [(str(s.pk), s.name) for s in organization.servers.order_by("name")]


def _initial(now: datetime) -> dict:
    """The last seven whole days, in the user's zone."""
    today = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    return {"window_start": today - timedelta(days=7), "window_end": today, "formats": list(FORMATS)}


def exports(request: HttpRequest, organization_id: int) -> HttpResponse:
    org = organization_for(request.user, organization_id)
    require_role(request.user, org.pk, MANAGE_SERVERS)
    if request.method == "POST":
        form = ExportForm(request.POST, organization=org)
        if form.is_valid():
            data = form.cleaned_data
            try:
                window = export_window(start=data["window_start"], end=data["window_end"])
                export = audit_export_request(
                    organization_id=org.pk,
                    user=request.user,
                    server_ids=[int(i) for i in data["servers"]] or None,
                    window=window,
                    formats=data["formats"],
                    enqueue=audit_export_build_task.delay,
                )
            except ExportError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, str(exc))
            else:
                messages.success(request, f"Export #{export.pk} is queued: its progress shows below.")
                return redirect("exports", org.pk)
    else:
        form = ExportForm(initial=_initial(timezone.now()), organization=org)
    rows = audit_exports(organization_ids=[org.pk])
    context = {
        "organization": org,
        "form": form,
        "exports": rows,
        "busy": any(r.busy for r in rows),
        "log": audit_log(organization_id=org.pk),
        "format_labels": FORMAT_LABELS,
        "retention_days": settings.EXPORT_RETENTION_DAYS,
    }
    return render_page(
        request, "console/exports.html", context, fragment="exports-list", status=400 if form.is_bound else 200
    )


def export_download(request: HttpRequest, organization_id: int, export_id: int) -> HttpResponse:
    org = organization_for(request.user, organization_id)
    require_role(request.user, org.pk, MANAGE_SERVERS)
    if audit_export(export_id=export_id, organization_ids=[org.pk]) is None:
        raise Http404("no such export")
    try:
        found = audit_export_download(export_id=export_id, user=request.user)
    except ExportNotReady as exc:
        messages.error(request, f"Export #{export_id}: {exc}.")
        return redirect("exports", org.pk)
    return zip_response(found)


urlpatterns = [
    path("organizations/<int:organization_id>/exports/", exports, name="exports"),
    path(
        "organizations/<int:organization_id>/exports/<int:export_id>/download/", export_download, name="export-download"
    ),
]
