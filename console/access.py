"""Who sees what. A user sees the servers of the organizations they belong to; staff see every one.
A server or statement of another organization is a 404 (never a 403 that would confirm it exists);
a page the user's role does not allow, in an organization they belong to, is a 403."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from collectors.checks import CheckState, check_state
from inventory.models import Membership, Organization, Server

Role = Membership.Role
MANAGE_SERVERS = (Role.DBA, Role.ADMIN)
MANAGE_MEMBERS = (Role.ADMIN,)


def visible_organizations(user) -> QuerySet[Organization]:
    if user.is_staff:
        return Organization.objects.all()
    return Organization.objects.filter(memberships__user=user)


def visible_servers(user) -> QuerySet[Server]:
    if user.is_staff:
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
    """The user's role in an organization (staff act as admins everywhere); None: not a member."""
    if user.is_staff:
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
    if user.is_staff:
        return Organization.objects.all()
    return Organization.objects.filter(memberships__user=user, memberships__role__in=roles)


def check_for(user, check_id: str) -> CheckState:
    """A "test connection" check, for those who may manage servers of the organization it was made for (what
    it reports, the typed connection included, is theirs): 404 for an unknown check and for a non-member, 403
    for a member without the role."""
    check = check_state(check_id=check_id)
    if check is None:
        raise Http404("no such connection check (or it ended more than an hour ago)")
    require_role(user, check.organization_id, MANAGE_SERVERS)
    return check
