"""The organizations list and an organization's page (/organizations/<id>/): members and roles for
every member, adding, changing and removing members for admins only, an organization never without
an admin (in the services and through the pages), access rules and bounded queries."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.core.exceptions import ValidationError
from django.urls import reverse

from inventory.connection import parse_dsn
from inventory.models import Membership, Organization
from inventory.services import membership_add, membership_remove, membership_update, server_create

pytestmark = pytest.mark.django_db
Role = Membership.Role


@dataclass
class World:
    acme: Organization
    other: Organization
    ada: User  # the only admin of acme
    dan: User  # dba in acme
    val: User  # viewer in acme
    sam: User  # admin of other
    newcomer: User  # a member of nothing
    staff: User  # viewer in other; is_staff (the admin site's login), not a superuser
    superuser: User  # a console administrator, a member of nothing

    def membership(self, user: User, org: Organization | None = None) -> Membership:
        return Membership.objects.get(user=user, organization=org or self.acme)


@pytest.fixture
def world() -> World:
    acme, other = Organization.objects.create(name="acme"), Organization.objects.create(name="other")
    users = {
        name: User.objects.create_user(name, password=f"pw-{name}-1")
        for name in ("ada", "dan", "val", "sam", "newcomer")
    }
    users["operator"] = User.objects.create_user("operator", password="pw-operator-1", is_staff=True)
    superuser = User.objects.create_user("root", password="pw-root-1", is_staff=True, is_superuser=True)
    roles = {
        "ada": (acme, Role.ADMIN),
        "dan": (acme, Role.DBA),
        "val": (acme, Role.VIEWER),
        "sam": (other, Role.ADMIN),
        "operator": (other, Role.VIEWER),
    }
    for name, (org, role) in roles.items():
        Membership.objects.create(user=users[name], organization=org, role=role)
    server_create(name="db1", connection=parse_dsn("postgresql://m@db1.example/app"), organization_name="acme")
    server_create(name="db2", connection=parse_dsn("postgresql://m@db2.example/app"), organization_name="acme")
    return World(acme, other, *[users[n] for n in ("ada", "dan", "val", "sam", "newcomer", "operator")], superuser)


def message(response) -> str:
    """The message the response left (the latest: earlier ones wait unread in the session)."""
    return [str(m) for m in get_messages(response.wsgi_request)][-1]


def role_of(user: User, org: Organization) -> str | None:
    return Membership.objects.filter(user=user, organization=org).values_list("role", flat=True).first()


# --- the services ---------------------------------------------------------------------------------------


def test_membership_services_keep_an_admin(world):
    with pytest.raises(ValidationError, match="there is no user named 'nobody' that you can add"):
        membership_add(organization=world.acme, username="nobody", role=Role.VIEWER)
    with pytest.raises(ValidationError, match="already a member"):
        membership_add(organization=world.acme, username="dan", role=Role.VIEWER)
    with pytest.raises(ValidationError):
        membership_add(organization=world.acme, username="newcomer", role="owner")
    last = world.membership(world.ada)
    with pytest.raises(ValidationError, match="last admin of acme"):
        membership_update(membership=last, role=Role.DBA)
    with pytest.raises(ValidationError, match="last admin of acme"):
        membership_remove(membership=last)
    assert role_of(world.ada, world.acme) == Role.ADMIN
    # With a second admin, the first may step down.
    membership_update(membership=world.membership(world.dan), role=Role.ADMIN)
    membership_update(membership=world.membership(world.ada), role=Role.VIEWER)
    assert role_of(world.ada, world.acme) == Role.VIEWER
    with pytest.raises(ValidationError, match="dan is the last admin"):
        membership_remove(membership=world.membership(world.dan))
    added = membership_add(organization=world.acme, username="newcomer", role=Role.DBA)
    assert (added.user, added.organization, added.role) == (world.newcomer, world.acme, Role.DBA)


# --- the list -------------------------------------------------------------------------------------------


def test_the_list_shows_the_users_organizations(client, world, django_assert_max_num_queries):
    client.force_login(world.val)
    client.get(reverse("organizations"))  # the session settles on a first request
    with django_assert_max_num_queries(5):
        html = client.get(reverse("organizations")).content.decode()
    assert reverse("organization", args=[world.acme.pk]) in html and "other" not in html
    # Counted over all the members (3) and servers (2), not only the user's own membership.
    assert '<td class="num">3</td>' in html and '<td class="num">2</td>' in html
    assert '<span class="badge">viewer</span>' in html
    assert reverse("organization-statements", args=[world.acme.pk]) in html


def test_superusers_see_every_organization(client, world):
    client.force_login(world.superuser)
    html = client.get(reverse("organizations")).content.decode()
    assert reverse("organization", args=[world.acme.pk]) in html
    assert reverse("organization", args=[world.other.pk]) in html
    assert "console administrator (not a member)" in html


def test_staff_see_only_their_organizations_with_their_role(client, world):
    """is_staff lets one into the admin site: in the console, a staff user is what their memberships make them."""
    client.force_login(world.staff)
    html = client.get(reverse("organizations")).content.decode()
    assert reverse("organization", args=[world.other.pk]) in html and '<span class="badge">viewer</span>' in html
    assert reverse("organization", args=[world.acme.pk]) not in html and "not a member" not in html
    page = client.get(reverse("organization", args=[world.other.pk]))
    assert page.status_code == 200 and page.context["role"] == Role.VIEWER and not page.context["can_manage"]


def test_a_user_without_organizations(client, world):
    client.force_login(world.newcomer)
    html = client.get(reverse("organizations")).content.decode()
    assert "You are not a member of any organization yet" in html


# --- an organization's page -----------------------------------------------------------------------------


def test_members_see_the_members_read_only(client, world, django_assert_max_num_queries):
    client.force_login(world.val)
    url = reverse("organization", args=[world.acme.pk])
    client.get(url)
    with django_assert_max_num_queries(7):
        response = client.get(url)
    html = response.content.decode()
    assert response.status_code == 200
    for name in ("ada", "dan", "val"):
        assert f"<td>{name}" in html
    assert "sam" not in html  # a member of another organization
    assert "db1" in html and "db2" in html
    assert "only admins change the members" in html
    assert reverse("organization-member-add", args=[world.acme.pk]) not in html and "<select" not in html


def test_admins_get_the_forms_but_the_last_admin_cannot_be_changed(client, world, django_assert_max_num_queries):
    for n in range(15):
        membership_add(
            organization=world.acme, username=User.objects.create_user(f"extra{n}").username, role=Role.VIEWER
        )
    client.force_login(world.ada)
    url = reverse("organization", args=[world.acme.pk])
    client.get(url)
    with django_assert_max_num_queries(7):
        html = client.get(url).content.decode()
    assert reverse("organization-member-add", args=[world.acme.pk]) in html
    ada, dan = world.membership(world.ada), world.membership(world.dan)
    assert reverse("organization-member-role", args=[world.acme.pk, dan.pk]) in html
    assert reverse("organization-member-remove", args=[world.acme.pk, dan.pk]) in html
    assert 'data-confirm="Remove dan from acme?"' in html and "data-autosubmit" in html
    # The last admin shows no control that would leave the organization without one.
    assert reverse("organization-member-role", args=[world.acme.pk, ada.pk]) not in html
    assert reverse("organization-member-remove", args=[world.acme.pk, ada.pk]) not in html
    assert "the last admin" in html


def test_the_page_of_another_organization_is_a_404(client, world):
    for user in (world.sam, world.staff):
        client.force_login(user)
        assert client.get(reverse("organization", args=[world.acme.pk])).status_code == 404
    client.force_login(world.superuser)
    assert client.get(reverse("organization", args=[world.acme.pk])).status_code == 200


# --- the member actions ---------------------------------------------------------------------------------


def test_an_admin_adds_a_member(client, world):
    client.force_login(world.ada)
    url = reverse("organization-member-add", args=[world.acme.pk])
    response = client.post(url, {"username": "newcomer", "role": "dba"})
    assert response.status_code == 302 and response.headers["Location"] == reverse("organization", args=[world.acme.pk])
    assert role_of(world.newcomer, world.acme) == Role.DBA
    assert message(response) == "newcomer is now dba in acme."
    unknown = client.post(url, {"username": "nobody", "role": "viewer"})
    nobody = (
        "there is no user named 'nobody' that you can add (a console administrator adds users of other organizations)"
    )
    assert message(unknown) == nobody
    twice = client.post(url, {"username": "newcomer", "role": "viewer"})
    assert "already a member" in message(twice) and role_of(world.newcomer, world.acme) == Role.DBA
    invalid = client.post(url, {"username": "", "role": "owner"})
    assert message(invalid) == "Give a user name and a role."


def test_a_staff_admin_cannot_learn_who_uses_other_organizations(client, world):
    """is_staff lets a user into the Django admin, not into other organizations' user lists: an admin of "other"
    who is staff gets the same answer for acme's dan as for a name nobody has; a superuser adds him."""
    Membership.objects.filter(user=world.staff, organization=world.other).update(role=Role.ADMIN)
    client.force_login(world.staff)
    url = reverse("organization-member-add", args=[world.other.pk])
    assert message(client.post(url, {"username": "dan", "role": "viewer"})) == (
        "there is no user named 'dan' that you can add (a console administrator adds users of other organizations)"
    )
    assert role_of(world.dan, world.other) is None
    client.force_login(world.superuser)
    client.post(url, {"username": "dan", "role": "viewer"})
    assert role_of(world.dan, world.other) == Role.VIEWER


def test_an_admin_cannot_learn_who_uses_the_console_elsewhere(client, world):
    """Adding a member of other organizations only answers as a name nobody has; a colleague (a member of one of
    the adder's organizations) or a console administrator may add them."""
    client.force_login(world.sam)  # admin of "other" only
    url = reverse("organization-member-add", args=[world.other.pk])
    hidden, unknown = (client.post(url, {"username": name, "role": "viewer"}) for name in ("dan", "nobody"))
    assert message(hidden) == message(unknown).replace("'nobody'", "'dan'")
    assert role_of(world.dan, world.other) is None
    Membership.objects.create(user=world.sam, organization=world.acme, role=Role.VIEWER)  # now dan's colleague
    assert message(client.post(url, {"username": "dan", "role": "viewer"})) == "dan is now viewer in other."
    client.force_login(world.superuser)
    assert message(client.post(url, {"username": "val", "role": "viewer"})) == "val is now viewer in other."


def test_an_admin_changes_a_role_but_never_of_the_last_admin(client, world):
    client.force_login(world.ada)
    dan, ada = world.membership(world.dan), world.membership(world.ada)
    response = client.post(reverse("organization-member-role", args=[world.acme.pk, dan.pk]), {"role": "admin"})
    assert response.status_code == 302 and role_of(world.dan, world.acme) == Role.ADMIN
    # Two admins now: ada may step down; then dan is the last one and may not.
    client.post(reverse("organization-member-role", args=[world.acme.pk, ada.pk]), {"role": "viewer"})
    assert role_of(world.ada, world.acme) == Role.VIEWER
    client.force_login(world.dan)
    refused = client.post(reverse("organization-member-role", args=[world.acme.pk, dan.pk]), {"role": "dba"})
    assert "dan is the last admin of acme" in message(refused)
    assert role_of(world.dan, world.acme) == Role.ADMIN


def test_an_admin_removes_a_member_but_never_the_last_admin(client, world):
    client.force_login(world.ada)
    val, ada = world.membership(world.val), world.membership(world.ada)
    response = client.post(reverse("organization-member-remove", args=[world.acme.pk, val.pk]))
    assert response.status_code == 302 and role_of(world.val, world.acme) is None
    refused = client.post(reverse("organization-member-remove", args=[world.acme.pk, ada.pk]))
    assert "ada is the last admin of acme" in message(refused) and role_of(world.ada, world.acme) == Role.ADMIN
    # With another admin, leaving is allowed, and leads back to the list (the page is no longer ada's).
    membership_update(membership=world.membership(world.dan), role=Role.ADMIN)
    left = client.post(reverse("organization-member-remove", args=[world.acme.pk, ada.pk]))
    assert left.headers["Location"] == reverse("organizations") and role_of(world.ada, world.acme) is None


def test_member_actions_need_the_admin_role(client, world):
    dan = world.membership(world.dan)
    actions = [
        (reverse("organization-member-add", args=[world.acme.pk]), {"username": "newcomer", "role": "admin"}),
        (reverse("organization-member-role", args=[world.acme.pk, dan.pk]), {"role": "admin"}),
        (reverse("organization-member-remove", args=[world.acme.pk, dan.pk]), {}),
    ]
    refused = ((world.val, 403), (world.dan, 403), (world.sam, 404), (world.newcomer, 404), (world.staff, 404))
    for user, status in refused:
        client.force_login(user)
        for url, data in actions:
            assert client.post(url, data).status_code == status, (user, url)
    # A staff user acts in their own organization with their membership's role (viewer): not as an admin.
    client.force_login(world.staff)
    sam = world.membership(world.sam, world.other)
    own = [
        (reverse("organization-member-add", args=[world.other.pk]), {"username": "newcomer", "role": "admin"}),
        (reverse("organization-member-role", args=[world.other.pk, sam.pk]), {"role": "viewer"}),
        (reverse("organization-member-remove", args=[world.other.pk, sam.pk]), {}),
    ]
    for url, data in own:
        assert client.post(url, data).status_code == 403, url
    assert role_of(world.sam, world.other) == Role.ADMIN and role_of(world.newcomer, world.other) is None
    client.force_login(world.ada)
    assert client.get(actions[0][0]).status_code == 405
    assert role_of(world.newcomer, world.acme) is None and role_of(world.dan, world.acme) == Role.DBA


def test_a_membership_of_another_organization_is_a_404(client, world):
    """An admin of acme cannot reach other's memberships through acme's URLs."""
    sam = world.membership(world.sam, world.other)
    client.force_login(world.ada)
    assert (
        client.post(reverse("organization-member-role", args=[world.acme.pk, sam.pk]), {"role": "viewer"}).status_code
        == 404
    )
    assert client.post(reverse("organization-member-remove", args=[world.acme.pk, sam.pk])).status_code == 404
    assert role_of(world.sam, world.other) == Role.ADMIN
