"""Who sees what (accounts/access.py), rule by rule: members see their organizations and act with their role,
console administrators (superusers) see everything as admins, staff alone opens nothing; another organization's
server is a 404, a role short of what is asked a 403; a weekly report goes to members and administrators only."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import Http404

from accounts import access
from inventory.models import Membership, Organization, Server

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    acme, other = Organization.objects.create(name="acme"), Organization.objects.create(name="other")
    users = get_user_model().objects
    viewer, dba = users.create_user("viewer"), users.create_user("dba")
    Membership.objects.create(organization=acme, user=viewer, role="viewer")
    Membership.objects.create(organization=acme, user=dba, role="dba")
    return {
        "acme": acme,
        "other": other,
        "viewer": viewer,
        "dba": dba,
        "staff": users.create_user("staff", is_staff=True),
        "root": users.create_superuser("root"),
        "acme_db": Server.objects.create(organization=acme, name="a", host="192.0.2.10"),
        "other_db": Server.objects.create(organization=other, name="b", host="192.0.2.11"),
    }


def test_a_member_sees_their_organizations_servers_and_no_other(world):
    viewer = world["viewer"]
    assert list(access.visible_organizations(viewer)) == [world["acme"]]
    assert access.visible_organization_ids(viewer) == [world["acme"].pk]
    assert list(access.visible_servers(viewer)) == [world["acme_db"]]
    assert access.server_for(viewer, world["acme_db"].pk) == world["acme_db"]
    with pytest.raises(Http404):
        access.server_for(viewer, world["other_db"].pk)  # exists, but a 404: never confirmed
    with pytest.raises(Http404):
        access.organization_for(viewer, world["other"].pk)


def test_staff_alone_opens_nothing_and_a_superuser_everything_as_admin(world):
    staff, root = world["staff"], world["root"]
    assert not access.visible_servers(staff).exists() and access.role_in(staff, world["acme"].pk) is None
    assert access.visible_organization_ids(root) is None  # no filter: every organization
    assert set(access.visible_servers(root)) == {world["acme_db"], world["other_db"]}
    assert access.require_role(root, world["other"].pk, access.MANAGE_MEMBERS) == "admin"


def test_a_role_short_of_the_one_asked_is_a_403_and_a_stranger_a_404(world):
    acme = world["acme"].pk
    assert access.require_role(world["dba"], acme, access.MANAGE_SERVERS) == "dba"
    with pytest.raises(PermissionDenied, match="yours: viewer"):
        access.require_role(world["viewer"], acme, access.MANAGE_SERVERS)
    with pytest.raises(Http404):
        access.require_role(world["viewer"], world["other"].pk, ("viewer",))
    assert list(access.managed_organizations(world["dba"])) == [world["acme"]]
    assert not access.managed_organizations(world["viewer"]).exists()


def test_a_report_goes_to_the_members_and_the_administrators(world):
    readers = set(access.organization_readers(world["acme"].pk).values_list("username", flat=True))
    assert readers == {"viewer", "dba", "root"}


def test_an_unknown_connection_check_is_a_404(world):
    with pytest.raises(Http404, match="no such connection check"):
        access.check_for(world["dba"], "no-such-check")
