"""Who sees what. A user sees the organizations they are a member of, and acts in each with their membership's
role; only console administrators (`is_superuser`) see and act in every organization, as admins. `is_staff`
alone (the Django admin's login, for operators who set organization limits) opens no organization's servers,
statements, reports or members: an operator who needs them is made a member, or a superuser.
A server or statement of another organization is a 404 (never a 403 that would confirm it exists);
a page the user's role does not allow, in an organization they belong to, is a 403."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404

from collectors.public import CheckState, check_state
from inventory.models import Membership, Organization, Server

Role = Membership.Role
MANAGE_SERVERS = (Role.DBA, Role.ADMIN)
MANAGE_MEMBERS = (Role.ADMIN,)
# An organization's own settings: its alert channels and rules (members are MANAGE_MEMBERS, the same role).
CONFIGURE = (Role.ADMIN,)


def sees_every_organization(user) -> bool:
    """A console administrator: every organization's servers and data, as an admin of each."""
    return bool(user.is_superuser)


def visible_organizations(user) -> QuerySet[Organization]:
    if sees_every_organization(user):
        return Organization.objects.all()
    return Organization.objects.filter(memberships__user=user)


def visible_organization_ids(user) -> list[int] | None:
    """The organizations whose rows a selector may return to the user; None: every one (no filter needed)."""
    if sees_every_organization(user):
        return None
    return list(visible_organizations(user).values_list("pk", flat=True))


def visible_servers(user) -> QuerySet[Server]:
    if sees_every_organization(user):
        return Server.objects.all()
    return Server.objects.filter(organization__memberships__user=user)


def server_for(user, server_id: int) -> Server:
    """The server if the user may see it, else 404."""
    server = visible_servers(user).select_related("organization").filter(pk=server_id).first()
    if server is None:
        raise Http404("no such server")
    return server


def organization_for(user, organization_id: int) -> Organization:
    organization = visible_organizations(user).filter(pk=organization_id).first()
    if organization is None:
        raise Http404("no such organization")
    return organization


def role_in(user, organization_id: int) -> str | None:
    """The user's role in an organization (console administrators act as admins everywhere); None: not a member."""
    if sees_every_organization(user):
        return Role.ADMIN
    return Membership.objects.filter(user=user, organization_id=organization_id).values_list("role", flat=True).first()


def require_role(user, organization_id: int, roles: tuple[str, ...]) -> str:
    """The user's role if it is one of `roles`; 404 for a non-member, 403 for a member without the role."""
    role = role_in(user, organization_id)
    if role is None:
        raise Http404("no such organization")
    if role not in roles:
        raise PermissionDenied(f"this needs the role {' or '.join(roles)} in the organization (yours: {role})")
    return role


def managed_organizations(user, roles: tuple[str, ...] = MANAGE_SERVERS) -> QuerySet[Organization]:
    """Organizations where the user holds one of `roles`."""
    if sees_every_organization(user):
        return Organization.objects.all()
    return Organization.objects.filter(memberships__user=user, memberships__role__in=roles)


def organization_readers(organization_id: int) -> QuerySet:
    """The users who may read an organization's data (its members and the console administrators): whom its
    weekly report may be mailed to."""
    members = Membership.objects.filter(organization_id=organization_id).values("user_id")
    return get_user_model().objects.filter(Q(pk__in=members) | Q(is_superuser=True))


def sees_connection_detail(user) -> bool:
    """libpq's own words and a failed connection's timing in a "test connection" report (CheckReport.seen_by).
    They map the console's network, not a customer's data: its operators (staff) debug with them, and only in a
    check they may open at all (check_for: a DBA or admin of its organization)."""
    return bool(user.is_staff)


def check_for(user, check_id: str) -> CheckState:
    """A "test connection" check, for those who may manage servers of the organization it was made for (what
    it reports, the typed connection included, is theirs): 404 for an unknown check and for a non-member, 403
    for a member without the role."""
    check = check_state(check_id=check_id)
    if check is None:
        raise Http404("no such connection check (or it ended more than an hour ago)")
    require_role(user, check.organization_id, MANAGE_SERVERS)
    return check
