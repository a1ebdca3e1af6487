"""Writes on organizations and servers: registering a server and changing it, and an organization's
members. Deleting a server or an organization takes its history with it, which this layer does not
know about: those deletes are in console/services.py."""

from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from inventory import tls
from inventory.connection import Connection
from inventory.endpoint import ENDPOINT_FIELDS
from inventory.models import Membership, Organization, Server

DEFAULT_ORGANIZATION = "default"
# Where the password is sent, and how: a change to any of these without a new password clears the stored one
# (sslmode, CA certificate, SCRAM: a password given for a verified TLS connection and SCRAM is never sent over
# a weaker one nor to a server another CA vouches for; organization: it is never handed to another tenant).
CONNECTION_FIELDS = ("organization", *ENDPOINT_FIELDS)
# Whose code the planner may run when the console plans the server's statements (Server.clean checks the names):
# not where the password goes, so a change keeps it.
PLANS_TRUST_FIELDS = ("plans_trusted_roles", "plans_trusted_schemas")
# What server_update may change (the collection status belongs to the collectors).
UPDATABLE_FIELDS = frozenset(
    {*CONNECTION_FIELDS, "name", "enabled", "interval_s", "cpu_count", "tags", *PLANS_TRUST_FIELDS}
)


def connection_moves(server: Server, changes: Mapping[str, Any]) -> bool:
    """Whether `changes` (field -> new value) send the server's connection elsewhere or otherwise, so that its
    stored password must not follow."""
    stored = {name: getattr(server, name) for name in CONNECTION_FIELDS}
    changed = {name: changes[name] for name in CONNECTION_FIELDS if name in changes}
    if "ssl_root_cert" in changed:
        changed["ssl_root_cert"] = tls.normalized(changed["ssl_root_cert"])
    return any(value != stored[name] for name, value in changed.items())


@transaction.atomic
def server_create(
    *,
    name: str,
    connection: Connection,
    organization_name: str = DEFAULT_ORGANIZATION,
    interval_s: int = 60,
    cpu_count: int | None = None,
    tags: list[str] | None = None,
    ssl_root_cert: str = "",
    require_scram: bool = True,
    plans_trusted_roles: list[str] | None = None,
    plans_trusted_schemas: list[str] | None = None,
) -> Server:
    """A new server at `connection` (typed in, or inventory.connection.parse_dsn's reading of a DSN), with the TLS
    and SCRAM settings a DSN cannot carry (libpq's sslrootcert is a file path; here the certificate itself), and
    the roles and schemas whose code may run while its statements are planned (none: only PostgreSQL's, the
    extensions' and the superusers')."""
    organization, _ = Organization.objects.get_or_create(name=organization_name)
    if Server.objects.filter(organization=organization, name=name).exists():
        raise ValidationError(f"a server named {name!r} already exists in organization {organization_name!r}")
    _within_limits(organization, interval_s=interval_s, joining=True)
    server = Server(
        organization=organization,
        name=name,
        interval_s=interval_s,
        cpu_count=cpu_count,
        tags=tags or [],
        ssl_root_cert=ssl_root_cert,
        require_scram=require_scram,
        plans_trusted_roles=plans_trusted_roles,  # None: none (Server.clean)
        plans_trusted_schemas=plans_trusted_schemas,
        **connection.server_fields(),
    )
    server.set_password(connection.password)
    server.full_clean()
    server.save()
    return server


@transaction.atomic
def server_update(
    *,
    server: Server,
    data: Mapping[str, Any],
    password: str | None = None,
    clear_password: bool = False,
) -> Server:
    """Change the fields in ``data`` (names from UPDATABLE_FIELDS); a non-empty ``password`` replaces
    the stored one.

    The stored password goes only where, and how, its owner sent it: when the organization, host, port,
    database, user, sslmode, CA certificate or SCRAM requirement change (CONNECTION_FIELDS) and no new password
    comes with the change, it is cleared, never sent to the new destination.
    """
    unknown = set(data) - UPDATABLE_FIELDS
    if unknown:
        raise ValidationError(f"cannot update {sorted(unknown)}")
    moved = connection_moves(server, data)
    joining = "organization" in data and data["organization"] != server.organization
    for field, value in data.items():
        setattr(server, field, value)
    if joining or "interval_s" in data:
        _within_limits(server.organization, interval_s=server.interval_s, joining=joining)
    if password:
        server.set_password(password)
    elif clear_password or moved:
        server.set_password(None)
    server.full_clean()
    server.save()
    return server


def _within_limits(organization: Organization, *, interval_s: int, joining: bool) -> None:
    """The organization's limits (Organization.max_servers, min_interval_s), for a server joining it (added or
    moved there) or changing its interval; the count is taken under a lock on the organization's row, so two
    servers added at once cannot both take the last place."""
    floor = organization.interval_floor_s()
    if interval_s < floor:
        raise ValidationError(
            {
                "interval_s": f"the shortest collection interval in organization {organization.name!r} is {floor} s "
                "(a console administrator can change it: the organization's minimum interval, or "
                "ORG_MIN_INTERVAL_S)"
            }
        )
    if not joining:
        return
    Organization.objects.select_for_update().filter(pk=organization.pk).first()
    limit = organization.server_limit()
    if Server.objects.filter(organization=organization).count() >= limit:
        raise ValidationError(
            f"organization {organization.name!r} already has {limit} servers, its limit (a console administrator "
            "can raise it: the organization's maximum of servers, or ORG_MAX_SERVERS)"
        )


def _admins_left_without(membership: Membership) -> int:
    """Admins of the membership's organization other than this one, locked until the transaction ends
    (two admins demoting each other at once must not both succeed)."""
    others = Membership.objects.select_for_update().filter(
        organization_id=membership.organization_id, role=Membership.Role.ADMIN
    )
    return sum(1 for m in others if m.pk != membership.pk)


@transaction.atomic
def membership_add(*, organization: Organization, username: str, role: str, added_by=None) -> Membership:
    """Make an existing user a member of ``organization`` with ``role``.

    ``added_by`` (a user who is not a superuser) may add a user who is a member of no organization yet, or of one of
    theirs: a user of other organizations only gets the same answer as a name nobody has, so that an admin of
    one organization cannot learn who uses the console elsewhere."""
    User = get_user_model()
    user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
    if user is not None and added_by is not None and not added_by.is_superuser:
        theirs = Membership.objects.filter(user=added_by).values("organization_id")
        elsewhere = Membership.objects.filter(user=user)
        if elsewhere.exists() and not elsewhere.filter(organization_id__in=theirs).exists():
            user = None
    if user is None:
        raise ValidationError(
            f"there is no user named {username!r} that you can add (a console administrator adds users of other "
            "organizations)"
        )
    if Membership.objects.filter(organization=organization, user=user).exists():
        raise ValidationError(f"{username} is already a member of {organization.name}")
    membership = Membership(organization=organization, user=user, role=role)
    membership.full_clean()
    membership.save()
    return membership


@transaction.atomic
def membership_update(*, membership: Membership, role: str) -> Membership:
    """Change a member's role; an organization never loses its last admin."""
    if (
        membership.role == Membership.Role.ADMIN
        and role != Membership.Role.ADMIN
        and not _admins_left_without(membership)
    ):
        raise ValidationError(
            f"{membership.user} is the last admin of {membership.organization.name}: make another member admin first"
        )
    membership.role = role
    membership.full_clean()
    membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership) -> None:
    """Remove a member; an organization never loses its last admin."""
    if membership.role == Membership.Role.ADMIN and not _admins_left_without(membership):
        raise ValidationError(
            f"{membership.user} is the last admin of {membership.organization.name}: make another member admin first"
        )
    membership.delete()
