"""The admin (as a superuser, through the test client): a server's password goes only where it was entered, the
names trusted for plans are checked as everywhere else, and deletes take the history with them."""

import json

import pytest

from history.tables import TABLES
from inventory.connection import parse_dsn
from inventory.models import Organization, Server
from inventory.services import server_create

pytestmark = pytest.mark.django_db

CLEARED = (
    "was cleared because its organization, host, port, database, user, sslmode, CA certificate or Require SCRAM changed"
)


def _server() -> Server:
    return server_create(
        name="db1", connection=parse_dsn("postgresql://mon:old-secret@db1.example:5432/app"), organization_name="acme"
    )


def _change(admin_client, server: Server, **changes):
    """POST the server's change form as a browser would: every field, the password left empty."""
    form = {
        "organization": server.organization_id,
        "name": server.name,
        "host": server.host,
        "port": server.port,
        "database": server.database,
        "user": server.user,
        "sslmode": server.sslmode,
        "enabled": "on",
        "interval_s": server.interval_s,
        "cpu_count": "",
        "tags": json.dumps(server.tags),
        "plans_trusted_roles": json.dumps(server.plans_trusted_roles),
        "plans_trusted_schemas": json.dumps(server.plans_trusted_schemas),
        "password": "",
        "ssl_root_cert": server.ssl_root_cert,
    }
    if server.require_scram:
        form["require_scram"] = "on"
    form.update(changes)
    form = {k: v for k, v in form.items() if v is not None}
    response = admin_client.post(f"/admin/inventory/server/{server.pk}/change/", form, follow=True)
    assert response.status_code == 200
    errors = response.context and response.context.get("errors")
    assert not errors, errors
    return response


def _stored(server: Server) -> Server:
    return Server.objects.get(pk=server.pk)


@pytest.mark.parametrize(
    "field, value",
    [
        ("host", "db2.example"),
        ("port", "6432"),
        ("database", "other"),
        ("user", "someone"),
        ("sslmode", "prefer"),
        ("organization", "elsewhere"),
    ],
)
def test_a_new_destination_without_the_password_clears_it_and_says_so(admin_client, field, value):
    server = _server()
    if field == "organization":
        value = str(Organization.objects.create(name=value).pk)
        field = "organization_id"
    response = _change(admin_client, server, **{field.removesuffix("_id"): value})
    assert str(getattr(_stored(server), field)) == value
    assert _stored(server).get_password() is None
    assert CLEARED in response.content.decode()


def test_a_new_destination_with_the_password_gets_that_one(admin_client):
    server = _server()
    response = _change(admin_client, server, host="db2.example", password="new-secret")
    assert _stored(server).get_password() == "new-secret"
    assert CLEARED not in response.content.decode() and "new-secret" not in response.content.decode()


def test_other_changes_keep_the_password(admin_client):
    server = _server()
    response = _change(admin_client, server, interval_s="30", name="renamed", tags='["prod"]')
    stored = _stored(server)
    assert (stored.interval_s, stored.name, stored.tags) == (30, "renamed", ["prod"])
    assert stored.get_password() == "old-secret" and CLEARED not in response.content.decode()


def test_the_names_trusted_for_plans_change_without_the_password_and_are_checked(admin_client):
    server = _server()
    page = admin_client.get(f"/admin/inventory/server/{server.pk}/change/").content.decode()
    assert "Trusted roles (plans)" in page and "Trusted schemas (plans)" in page
    response = _change(
        admin_client, server, plans_trusted_roles='["app_owner", "Reporting", "app_owner"]', plans_trusted_schemas=""
    )
    stored = _stored(server)
    assert (stored.plans_trusted_roles, stored.plans_trusted_schemas) == (["app_owner", "Reporting"], [])
    assert stored.get_password() == "old-secret" and CLEARED not in response.content.decode()
    refused = admin_client.post(
        f"/admin/inventory/server/{server.pk}/change/",
        {
            "organization": server.organization_id,
            "name": server.name,
            "host": server.host,
            "port": server.port,
            "database": server.database,
            "user": server.user,
            "sslmode": server.sslmode,
            "interval_s": server.interval_s,
            "tags": "[]",
            "plans_trusted_roles": '"app_owner"',
            "plans_trusted_schemas": '["' + "é" * 32 + '"]',
        },
    )
    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors
    assert errors["plans_trusted_roles"] == ["a list of role names is expected, not 'app_owner'"]
    assert "is 64 bytes in UTF-8" in errors["plans_trusted_schemas"][0]
    assert _stored(server).plans_trusted_roles == ["app_owner", "Reporting"]


def test_clear_password_and_a_new_password_alone(admin_client):
    server = _server()
    _change(admin_client, server, password="rotated")
    assert _stored(server).get_password() == "rotated"
    _change(admin_client, server, clear_password="on")
    assert _stored(server).get_password() is None


def test_adding_a_server_stores_its_password_encrypted(admin_client):
    organization = Organization.objects.create(name="acme")
    response = admin_client.post(
        "/admin/inventory/server/add/",
        {
            "organization": organization.pk,
            "name": "new",
            "host": "db9.example",
            "port": "5432",
            "database": "app",
            "user": "mon",
            "sslmode": "prefer",
            "enabled": "on",
            "interval_s": "60",
            "cpu_count": "",
            "tags": "[]",
            "password": "typed-secret",
        },
        follow=True,
    )
    assert response.status_code == 200
    server = Server.objects.get(name="new")
    assert server.get_password() == "typed-secret" and "typed-secret" not in server.password_encrypted


def test_deleting_a_server_removes_its_history(admin_client, collected_server, history_rows):
    gone, kept = collected_server("gone"), collected_server("kept")
    confirm = admin_client.get(f"/admin/inventory/server/{gone.pk}/delete/")
    assert confirm.status_code == 200
    response = admin_client.post(f"/admin/inventory/server/{gone.pk}/delete/", {"post": "yes"}, follow=True)
    assert response.status_code == 200
    assert not Server.objects.filter(pk=gone.pk).exists()
    assert set(history_rows(gone.pk).values()) == {0}
    assert history_rows(kept.pk)[TABLES.SNAPSHOT.name] == 2


def test_deleting_selected_servers_removes_their_history(admin_client, collected_server, history_rows):
    servers = [collected_server("one"), collected_server("two")]
    kept = collected_server("kept")
    selected = {"action": "delete_selected", "_selected_action": [s.pk for s in servers], "post": "yes"}
    response = admin_client.post("/admin/inventory/server/", selected, follow=True)
    assert response.status_code == 200
    assert list(Server.objects.values_list("name", flat=True)) == ["kept"]
    for server in servers:
        assert set(history_rows(server.pk).values()) == {0}
    assert history_rows(kept.pk)[TABLES.SNAPSHOT.name] == 2


def test_deleting_an_organization_removes_its_servers_history(admin_client, collected_server, history_rows):
    gone = collected_server("gone", org="leaving")
    response = admin_client.post(
        f"/admin/inventory/organization/{gone.organization_id}/delete/", {"post": "yes"}, follow=True
    )
    assert response.status_code == 200
    assert not Server.objects.filter(pk=gone.pk).exists()
    assert set(history_rows(gone.pk).values()) == {0}


def test_statements_cannot_be_deleted_one_by_one(admin_client, collected_server):
    server = collected_server("db")
    statement = server.statements.first()
    assert admin_client.get(f"/admin/collectors/statement/{statement.pk}/delete/").status_code == 403
