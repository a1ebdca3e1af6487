"""Organizations and their members: the list of the user's organizations, and an organization's page
with its members and roles (every member sees them; admins add an existing user, change a role or
remove a member, and an organization never loses its last admin) and its advisor thresholds (admins
override them, every member reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from accounts.access import MANAGE_MEMBERS, organization_for, require_role, role_in, visible_organizations
from advisor.selectors import threshold_overrides
from advisor.services import organization_thresholds_update
from console.forms import AdvisorThresholdsForm, MemberAddForm, RoleForm
from console.views.common import render_page
from inventory.models import Membership, Organization
from inventory.services import membership_add, membership_remove, membership_update

ROLE_MEANING = {
    Membership.Role.VIEWER: "sees the servers and their statements",
    Membership.Role.DBA: "also adds, changes and removes servers and acknowledges alerts",
    Membership.Role.ADMIN: "also manages the members and the alert channels and rules",
}


@dataclass(frozen=True)
class MemberRow:
    membership: Membership
    last_admin: bool  # can be neither demoted nor removed


@dataclass(frozen=True)
class OrganizationRow:
    organization: Organization
    role: str | None  # the user's (None: a console administrator who is not a member)


def organizations(request: HttpRequest) -> HttpResponse:
    # Counted over every membership, not only the user's (a filter on the same relation would).
    visible = Organization.objects.filter(pk__in=visible_organizations(request.user).values("pk"))
    counted = visible.annotate(
        members=Count("memberships", distinct=True), server_count=Count("servers", distinct=True)
    )
    roles = dict(Membership.objects.filter(user=request.user).values_list("organization_id", "role"))
    rows = [OrganizationRow(o, roles.get(o.pk)) for o in counted.order_by("name")]
    return render_page(request, "console/organizations.html", {"rows": rows})


def organization(request: HttpRequest, organization_id: int) -> HttpResponse:
    org = organization_for(request.user, organization_id)
    form = AdvisorThresholdsForm(overrides=threshold_overrides(organization_id=org.pk))
    return _organization_page(request, org, form)


def _organization_page(request: HttpRequest, org: Organization, thresholds_form: AdvisorThresholdsForm) -> HttpResponse:
    role = role_in(request.user, org.pk)
    memberships = list(org.memberships.select_related("user").order_by("user__username"))
    admins = sum(1 for m in memberships if m.role == Membership.Role.ADMIN)
    members = [MemberRow(m, m.role == Membership.Role.ADMIN and admins == 1) for m in memberships]
    context = {
        "organization": org,
        "role": role,
        "can_manage": role in MANAGE_MEMBERS,
        "members": members,
        "servers": list(org.servers.order_by("name")),
        "add_form": MemberAddForm(),
        "roles": [(role, ROLE_MEANING[role]) for role in Membership.Role.values],
        "thresholds_form": thresholds_form,
    }
    return render_page(request, "console/organization.html", context)


@require_POST
def advisor_thresholds(request: HttpRequest, organization_id: int) -> HttpResponse:
    """Save the organization's advisor thresholds (admins); an invalid value shows the page with its error."""
    require_role(request.user, organization_id, MANAGE_MEMBERS)
    org = organization_for(request.user, organization_id)
    form = AdvisorThresholdsForm(request.POST, overrides=threshold_overrides(organization_id=org.pk))
    if form.is_valid():
        try:
            organization_thresholds_update(organization=org, values=form.cleaned_data)
        except ValidationError as exc:
            by_field = exc.message_dict if hasattr(exc, "error_dict") else {None: exc.messages}
            for name, errors in by_field.items():
                form.add_error(name if name in form.fields else None, errors)
        else:
            messages.success(request, f"The advisor thresholds of {org.name} are saved; the next evaluation uses them.")
            return redirect(f"{reverse('organization', args=[org.pk])}#advisor-thresholds")
    messages.error(request, "The advisor thresholds were not saved: see the errors below.")
    return _organization_page(request, org, form)


@require_POST
def member_add(request: HttpRequest, organization_id: int) -> HttpResponse:
    require_role(request.user, organization_id, MANAGE_MEMBERS)
    org = organization_for(request.user, organization_id)
    form = MemberAddForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give a user name and a role.")
    else:
        try:
            m = membership_add(
                organization=org,
                username=form.cleaned_data["username"],
                role=form.cleaned_data["role"],
                added_by=request.user,
            )
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, f"{m.user} is now {m.role} in {org.name}.")
    return redirect("organization", org.pk)


@require_POST
def member_role(request: HttpRequest, organization_id: int, membership_id: int) -> HttpResponse:
    require_role(request.user, organization_id, MANAGE_MEMBERS)
    membership = _membership(organization_id, membership_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose viewer, dba or admin.")
    else:
        try:
            membership_update(membership=membership, role=form.cleaned_data["role"])
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, f"{membership.user} is now {membership.role}.")
    return redirect("organization", organization_id)


@require_POST
def member_remove(request: HttpRequest, organization_id: int, membership_id: int) -> HttpResponse:
    require_role(request.user, organization_id, MANAGE_MEMBERS)
    membership = _membership(organization_id, membership_id)
    try:
        membership_remove(membership=membership)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{membership.user} is no longer a member of {membership.organization.name}.")
        if membership.user_id == request.user.pk and role_in(request.user, organization_id) is None:
            return redirect("organizations")  # left it: its page is no longer theirs to see
    return redirect("organization", organization_id)


def _membership(organization_id: int, membership_id: int) -> Membership:
    return get_object_or_404(
        Membership.objects.select_related("user", "organization"), pk=membership_id, organization_id=organization_id
    )


urlpatterns = [
    path("organizations/", organizations, name="organizations"),
    path("organizations/<int:organization_id>/", organization, name="organization"),
    path("organizations/<int:organization_id>/members/", member_add, name="organization-member-add"),
    path(
        "organizations/<int:organization_id>/advisor-thresholds/",
        advisor_thresholds,
        name="organization-advisor-thresholds",
    ),
    path(
        "organizations/<int:organization_id>/members/<int:membership_id>/role/",
        member_role,
        name="organization-member-role",
    ),
    path(
        "organizations/<int:organization_id>/members/<int:membership_id>/remove/",
        member_remove,
        name="organization-member-remove",
    ),
]
