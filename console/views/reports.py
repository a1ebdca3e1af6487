"""An organization's weekly report in the console: its schedule and extra recipients (DBA and admin), the
member's own opt-in, a preview of the report of the last complete week (the mail's own HTML, framed from a
URL of its own with its own CSP, the charts as data: URIs of the same render), "send me a test now", the
send history and the recipients that keep failing. Every member sees the page; other users get a 404.
And the unsubscribe link of the mails, which works without a login (signed, see reports/unsubscribe.py)."""

from __future__ import annotations

import zoneinfo

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from accounts.access import MANAGE_SERVERS, organization_for, require_role, role_in
from console import throttling
from console.views.common import render_page
from inventory.models import Organization
from reports.forms import WEEKDAYS, ReportScheduleForm
from reports.mail import weekly_preview_html
from reports.selectors import (
    failing_recipients,
    is_opted_in,
    next_due,
    preview_week,
    report_schedule,
    report_week,
    send_history,
    unsubscribed,
)
from reports.services import (
    report_opt_in_set,
    report_schedule_update,
    report_send_test,
    report_unsubscribe,
)
from reports.unsubscribe import read_token, unsubscribe_url
from reports.weekly import weekly_report
from reports.weeks import ReportWeek, WeekError, week_of

# The preview is the mail's HTML: its own inline styles and data: images, and nothing else (no script).
PREVIEW_CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'self'"
)


def _week(request: HttpRequest, organization_id: int, params) -> tuple[ReportWeek, str]:
    """?week= (2026-W47; the week in progress: so far), or the last complete week (the week so far before the
    first whole week of history); a bad one gives the default and the reason."""
    now = timezone.now()
    label = params.get("week") or None
    if label is None:
        return preview_week(organization_id=organization_id, now=now), ""
    try:
        return report_week(organization_id=organization_id, label=label, now=now), ""
    except WeekError as exc:
        current = week_of(now, time_zone=report_schedule(organization_id=organization_id).time_zone)
        if label.strip() == current.label:
            return current.so_far(now), ""
        return preview_week(organization_id=organization_id, now=now), str(exc)


def reports(request: HttpRequest, organization_id: int) -> HttpResponse:
    org = organization_for(request.user, organization_id)
    form = ReportScheduleForm(schedule=report_schedule(organization_id=org.pk))
    return _page(request, org, form)


def _page(request: HttpRequest, org: Organization, form: ReportScheduleForm, *, status: int = 200) -> HttpResponse:
    role = role_in(request.user, org.pk)
    can_manage = role in MANAGE_SERVERS
    week, error = _week(request, org.pk, request.GET)
    schedule = report_schedule(organization_id=org.pk)
    history = send_history(organization_id=org.pk)
    context = {
        "organization": org,
        "role": role,
        "can_manage": can_manage,
        "form": form,
        "schedule": schedule,
        "schedule_text": f"{WEEKDAYS[schedule.weekday]} {schedule.hour:02d}:00 {schedule.time_zone}",
        "next_due": next_due(schedule, now=timezone.now()),
        "opted_in": is_opted_in(organization_id=org.pk, user=request.user),
        "errors": [error] if error else [],
        "week": week,
        "preview_url": reverse("organization-reports-preview", args=[org.pk]) + f"?week={week.label}",
        "history": history,
        # A new installation is told when its first report goes out (a test send is not one).
        "weekly_sent": any(row.send.kind == "weekly" for row in history),
        "failing": failing_recipients(organization_id=org.pk) if can_manage else [],
        "zones": sorted(zoneinfo.available_timezones()) if can_manage else [],
        "unsubscribed": unsubscribed(organization_id=org.pk) if can_manage else [],
    }
    return render_page(request, "console/reports.html", context, status=status)


@require_POST
def schedule(request: HttpRequest, organization_id: int) -> HttpResponse:
    require_role(request.user, organization_id, MANAGE_SERVERS)
    org = organization_for(request.user, organization_id)
    form = ReportScheduleForm(request.POST)
    if form.is_valid():
        try:
            report_schedule_update(organization_id=org.pk, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"The weekly report settings of {org.name} are saved.")
            return redirect("organization-reports", org.pk)
    messages.error(request, "The report settings were not saved: see the errors below.")
    return _page(request, org, form, status=400)


@require_POST
def opt_in(request: HttpRequest, organization_id: int) -> HttpResponse:
    org = organization_for(request.user, organization_id)
    wanted = request.POST.get("opted_in") == "1"
    try:
        report_opt_in_set(organization_id=org.pk, user=request.user, opted_in=wanted)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(
            request,
            f"You will receive the weekly report at {request.user.email}."
            if wanted
            else "You will no longer receive the weekly report.",
        )
    return redirect("organization-reports", org.pk)


@require_POST
def test_send(request: HttpRequest, organization_id: int) -> HttpResponse:
    """The report of the week previewed, at once, to the user's own address only."""
    org = organization_for(request.user, organization_id)
    week, error = _week(request, org.pk, request.POST)
    if wait := throttling.wait_s(request, "test_mail"):
        messages.error(request, f"Too many test mails in an hour: try again in {throttling.wait_text(wait)}.")
    elif not request.user.email:
        messages.error(request, "Your account has no email address: an admin can set one in the Django admin.")
    else:
        result = report_send_test(
            organization_id=org.pk, week=week, address=request.user.email, requested_by=request.user
        )
        if result.sent:
            messages.success(request, f"The report of {week.label} was sent to {request.user.email}.")
        else:
            error = next(iter(result.errors.values()), "unknown error")
            messages.error(request, f"The test to {request.user.email} failed: {error}")
    return redirect(reverse("organization-reports", args=[org.pk]) + f"?week={week.label}")


@xframe_options_sameorigin
def preview(request: HttpRequest, organization_id: int) -> HttpResponse:
    """The mail of the week as the current user would get it, for the page's frame (or a tab of its own)."""
    org = organization_for(request.user, organization_id)
    if wait := throttling.wait_s(request, "preview"):
        text = f"Too many previews in a minute: try again in {throttling.wait_text(wait)}."
        return HttpResponse(
            text, status=429, content_type="text/plain; charset=utf-8", headers={"Retry-After": str(wait)}
        )
    week, _ = _week(request, org.pk, request.GET)
    report = weekly_report(organization_id=org.pk, week=week)
    address = request.user.email or "you@example.com"
    html = weekly_preview_html(report, unsubscribe_url=unsubscribe_url(organization_id=org.pk, address=address))
    # Links leave the frame for the whole window (the console's pages refuse to be framed).
    html = html.replace("<head>", '<head>\n<base target="_top">', 1)
    response = HttpResponse(html)
    response.headers["Content-Security-Policy"] = PREVIEW_CSP
    response.headers["Cache-Control"] = "private, no-store"
    return response


@login_not_required
@csrf_exempt  # the mail client's one-click POST (RFC 8058) carries no token; the signed URL is the proof
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    """GET: a page with a button; POST (that button, or the mail client's one-click): unsubscribed."""
    found = read_token(token)
    org = Organization.objects.filter(pk=found.organization_id).first() if found else None
    if org is None:
        return render(request, "reports/unsubscribe_invalid.html", status=400)
    context = {"organization": org, "address": found.address}
    if request.method == "POST":
        report_unsubscribe(organization_id=org.pk, address=found.address)
        return render(request, "reports/unsubscribe_done.html", context)
    return render(request, "reports/unsubscribe.html", context)


urlpatterns = [
    path("organizations/<int:organization_id>/reports/", reports, name="organization-reports"),
    path("organizations/<int:organization_id>/reports/schedule/", schedule, name="organization-reports-schedule"),
    path("organizations/<int:organization_id>/reports/opt-in/", opt_in, name="organization-reports-opt-in"),
    path("organizations/<int:organization_id>/reports/test/", test_send, name="organization-reports-test"),
    path("organizations/<int:organization_id>/reports/preview/", preview, name="organization-reports-preview"),
    path("reports/unsubscribe/<str:token>/", unsubscribe, name="report-unsubscribe"),
]
