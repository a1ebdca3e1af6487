"""inventory/services.py: a stored password goes only to the connection it was given for; an organization's limits
hold whichever way a server comes in; the roles and schemas trusted for plans are stored checked (each once)."""

import pytest
from django.core.exceptions import ValidationError

from inventory.connection import Connection
from inventory.endpoint import Endpoint
from inventory.models import Organization, Server
from inventory.services import server_create, server_update

pytestmark = pytest.mark.django_db

DB1 = Connection(host="db1.example", database="app", user="mon", password="old-secret")


def _server() -> Server:
    server = server_create(name="db1", connection=DB1, organization_name="acme")
    assert server.get_password() == "old-secret"
    return server


def _stored(server: Server) -> Server:
    return Server.objects.get(pk=server.pk)


def test_a_new_server_stores_its_connection_and_only_its_passwords_ciphertext():
    stored = _stored(_server())
    assert stored.endpoint == Endpoint(
        host="db1.example", port=5432, database="app", user="mon", sslmode="require", require_scram=True
    )
    assert stored.password_encrypted and "old-secret" not in stored.password_encrypted
    without = server_create(name="db2", connection=Connection(host="db2.example"), organization_name="acme")
    assert _stored(without).password_encrypted == "" and _stored(without).get_password() is None


@pytest.mark.parametrize(
    "field, value",
    [
        ("host", "db2.example"),
        ("port", 6432),
        ("database", "other"),
        ("user", "someone"),
        ("sslmode", "disable"),
        ("sslmode", "verify-full"),
        ("organization", "elsewhere"),
    ],
)
def test_a_new_destination_without_a_password_clears_the_stored_one(field, value):
    """Another server, or the same one reached otherwise (a weaker or stronger TLS mode: the password was given
    for that one), or another tenant."""
    if field == "organization":
        value = Organization.objects.create(name=value)
    server = server_update(server=_server(), data={field: value})
    assert getattr(_stored(server), field) == value
    assert _stored(server).password_encrypted == "" and _stored(server).get_password() is None


def test_a_new_destination_with_a_password_gets_only_that_one():
    server = server_update(server=_server(), data={"host": "db2.example", "user": "other"}, password="new-secret")
    assert _stored(server).get_password() == "new-secret"


def test_other_changes_keep_the_password():
    server = _server()
    data = {
        "name": "renamed",
        "host": "db1.example",
        "port": 5432,
        "database": "app",
        "user": "mon",
        "sslmode": server.sslmode,
        "enabled": False,
        "interval_s": 30,
        "cpu_count": 8,
        "tags": ["prod"],
        "organization": server.organization,
    }
    server = server_update(server=server, data=data)
    stored = _stored(server)
    assert (stored.name, stored.enabled, stored.interval_s, stored.cpu_count, stored.tags) == (
        "renamed",
        False,
        30,
        8,
        ["prod"],
    )
    assert stored.organization.name == "acme" and stored.get_password() == "old-secret"


def test_the_names_trusted_for_plans_are_stored_each_once_and_change_without_the_password():
    server = server_create(
        name="db1",
        connection=DB1,
        organization_name="acme",
        plans_trusted_roles=["app_owner", "Reporting", "app_owner"],
        plans_trusted_schemas=["ext schema"],
    )
    stored = _stored(server)
    assert (stored.plans_trusted_roles, stored.plans_trusted_schemas) == (["app_owner", "Reporting"], ["ext schema"])
    without = server_create(name="db2", connection=Connection(host="db2.example"), organization_name="acme")
    assert (_stored(without).plans_trusted_roles, _stored(without).plans_trusted_schemas) == ([], [])
    server = server_update(server=stored, data={"plans_trusted_roles": ["other", "other"], "plans_trusted_schemas": []})
    stored = _stored(server)
    assert (stored.plans_trusted_roles, stored.plans_trusted_schemas) == (["other"], [])
    assert stored.get_password() == "old-secret"  # not where the password goes


@pytest.mark.parametrize(
    "field, names, words",
    [
        ("plans_trusted_roles", ["é" * 32], "role name 'éééé"),
        ("plans_trusted_roles", [""], "a role name cannot be empty"),
        ("plans_trusted_schemas", ["a\x00b"], "schema name 'a\\x00b' holds a NUL character"),
        ("plans_trusted_schemas", [f"s{n}" for n in range(101)], "at most 100 schema names, not 101"),
    ],
    ids=["too long", "empty", "NUL", "too many"],
)
def test_bad_names_trusted_for_plans_are_refused_on_their_field(field, names, words):
    with pytest.raises(ValidationError) as refused:
        server_create(name="db1", connection=DB1, organization_name="acme", **{field: names})
    assert list(refused.value.message_dict) == [field] and words in refused.value.message_dict[field][0]
    assert not Server.objects.filter(name="db1").exists()
    server = _server()
    with pytest.raises(ValidationError) as refused:
        server_update(server=server, data={field: names})
    assert words in refused.value.message_dict[field][0]
    assert getattr(_stored(server), field) == []


def test_a_new_password_alone_replaces_it_and_clear_password_removes_it():
    server = server_update(server=_server(), data={}, password="rotated")
    assert _stored(server).get_password() == "rotated"
    server_update(server=server, data={}, clear_password=True)
    assert _stored(server).get_password() is None


@pytest.mark.parametrize(
    "data",
    [
        {"password_encrypted": "forged"},
        {"last_success_at": None},
        {"interval_s": 1},
        {"port": 70000},
        {"sslmode": "sometimes"},
    ],
)
def test_refuses_what_it_may_not_or_cannot_store(data):
    server = _server()
    with pytest.raises(ValidationError):
        server_update(server=server, data=data, password="never-stored")
    assert _stored(server).get_password() == "old-secret" and _stored(server).interval_s == 60


def test_a_name_taken_in_the_organization_is_refused():
    server = _server()
    server_create(name="db2", connection=Connection(host="db2.example"), organization_name="acme")
    with pytest.raises(ValidationError):
        server_update(server=server, data={"name": "db2"})


def test_an_organization_registers_no_more_servers_than_its_limit(settings):
    settings.ORG_MAX_SERVERS = 2
    server_create(name="a", connection=Connection(host="a.example"), organization_name="small")
    server_create(name="b", connection=Connection(host="b.example"), organization_name="small")
    with pytest.raises(ValidationError, match="organization 'small' already has 2 servers, its limit"):
        server_create(name="c", connection=Connection(host="c.example"), organization_name="small")
    # Moved in from another organization: the same limit.
    elsewhere = server_create(name="c", connection=Connection(host="c.example"), organization_name="other")
    small = Organization.objects.get(name="small")
    with pytest.raises(ValidationError, match="its limit"):
        server_update(server=elsewhere, data={"organization": small})
    assert _stored(elsewhere).organization.name == "other"
    # An administrator raises this organization's own limit: the setting is only the default.
    Organization.objects.filter(pk=small.pk).update(max_servers=3)
    server_create(name="c", connection=Connection(host="c.example"), organization_name="small")
    assert Server.objects.filter(organization=small).count() == 3


def test_an_organization_has_a_shortest_interval(settings):
    settings.ORG_MIN_INTERVAL_S = 15
    with pytest.raises(ValidationError) as refused:
        server_create(name="fast", connection=Connection(host="a.example"), organization_name="acme", interval_s=10)
    assert (
        "the shortest collection interval in organization 'acme' is 15 s" in refused.value.message_dict["interval_s"][0]
    )
    server = server_create(name="ok", connection=Connection(host="a.example"), organization_name="acme", interval_s=15)
    with pytest.raises(ValidationError, match="shortest collection interval"):
        server_update(server=server, data={"interval_s": 5})
    Organization.objects.filter(name="acme").update(min_interval_s=5)
    assert server_update(server=_stored(server), data={"interval_s": 5}).interval_s == 5
