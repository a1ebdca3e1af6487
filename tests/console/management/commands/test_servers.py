"""manage.py servers add|update|list|remove, passwords encrypted at rest, never shown, and the roles and schemas
trusted for plans."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from inventory.models import Server

pytestmark = pytest.mark.django_db


def _out(capsys, *args) -> str:
    call_command(*args)
    return capsys.readouterr().out


def test_add_list_remove_never_show_the_password(capsys):
    secret = "Sup3r-Secret-pw"
    out = _out(
        capsys,
        "servers",
        "add",
        "db1",
        "--dsn",
        f"postgresql://mon:{secret}@db1.example:6432/app",
        "--org",
        "acme",
        "--interval",
        "30",
        "--cpus",
        "8",
        "--tag",
        "prod",
    )
    assert "added acme/db1" in out and secret not in out
    server = Server.objects.get(name="db1")
    assert (server.host, server.port, server.database, server.user) == ("db1.example", 6432, "app", "mon")
    assert (server.interval_s, server.cpu_count, server.tags) == (30, 8, ["prod"])
    with connection.cursor() as cur:
        cur.execute("SELECT password_encrypted FROM console_server WHERE id = %s", [server.pk])
        stored = cur.fetchone()[0]
    assert secret not in stored and stored  # encrypted at rest
    assert server.get_password() == secret

    listed = _out(capsys, "servers", "list")
    # Of every server listed (another test's session-wide history may be there too), acme's db1.
    as_json = [s for s in json.loads(_out(capsys, "servers", "list", "--json")) if s["name"] == "db1"]
    assert secret not in listed and secret not in json.dumps(as_json)
    assert as_json[0]["has_password"] is True and as_json[0]["status"] == "never collected"
    assert "password" not in as_json[0] and "password_encrypted" not in as_json[0]

    with pytest.raises(CommandError, match="already exists"):
        call_command("servers", "add", "db1", "--dsn", "host=db1.example", "--org", "acme")
    assert "removed acme/db1" in _out(capsys, "servers", "remove", "db1")
    assert not Server.objects.filter(name="db1").exists()
    with pytest.raises(CommandError, match="no server named"):
        call_command("servers", "remove", "db1")


def test_same_name_in_two_organizations(capsys):
    call_command("servers", "add", "db", "--dsn", "host=a", "--org", "one")
    call_command("servers", "add", "db", "--dsn", "host=b", "--org", "two")
    with pytest.raises(CommandError, match="--org"):
        call_command("servers", "remove", "db")
    call_command("servers", "remove", "db", "--org", "two")
    assert list(Server.objects.filter(name="db").values_list("host", flat=True)) == ["a"]


def test_admin_never_renders_the_password(admin_client):
    call_command("servers", "add", "db9", "--dsn", "postgresql://mon:hunter2-secret@h/app")
    server = Server.objects.get(name="db9")
    page = admin_client.get(f"/admin/inventory/server/{server.pk}/change/").content.decode()
    assert "hunter2-secret" not in page and server.password_encrypted not in page
    assert 'type="password"' in page


def test_update_sends_the_password_only_where_it_was_given(capsys):
    call_command("servers", "add", "db1", "--dsn", "postgresql://mon:old-secret@db1.example/app", "--org", "acme")
    out = _out(
        capsys, "servers", "update", "db1", "--interval", "30", "--cpus", "4", "--tag", "a", "--tag", "b", "--disable"
    )
    server = Server.objects.get(name="db1")
    assert "updated acme/db1" in out and "old-secret" not in out
    assert (server.interval_s, server.cpu_count, server.tags, server.enabled) == (30, 4, ["a", "b"], False)
    assert server.get_password() == "old-secret"

    # Same destination, no password in the DSN: the stored one stays.
    call_command("servers", "update", "db1", "--dsn", "postgresql://mon@db1.example/app")
    assert Server.objects.get(name="db1").get_password() == "old-secret"

    # Another host without a password: cleared, and said.
    call_command("servers", "update", "db1", "--dsn", "postgresql://mon@db2.example/app")
    captured = capsys.readouterr()
    server = Server.objects.get(name="db1")
    assert server.host == "db2.example" and server.get_password() is None
    assert "the stored password was cleared" in captured.err

    call_command("servers", "update", "db1", "--dsn", "postgresql://mon:new-secret@db3.example:6432/app", "--enable")
    server = Server.objects.get(name="db1")
    assert (server.host, server.port, server.enabled) == ("db3.example", 6432, True)
    assert server.get_password() == "new-secret"
    with pytest.raises(CommandError, match="no server named"):
        call_command("servers", "update", "nope", "--interval", "30")
    with pytest.raises(CommandError, match="interval_s"):
        call_command("servers", "update", "db1", "--interval", "1")


def test_add_with_update_is_repeatable(capsys):
    """What docker-compose's one-shot registration runs at every start."""
    args = ["servers", "add", "demo", "--dsn", "postgresql://mon:pw@monitored/postgres", "--interval", "15", "--update"]
    assert "added default/demo" in _out(capsys, *args)
    assert "updated default/demo" in _out(capsys, *args)
    server = Server.objects.get(name="demo")
    assert (server.interval_s, server.get_password()) == (15, "pw")


def test_the_names_trusted_for_plans_are_added_replaced_emptied_and_listed(capsys):
    call_command(
        "servers",
        "add",
        "db1",
        "--dsn",
        "postgresql://mon:old-secret@db1.example/app",
        "--org",
        "acme",
        "--trust-role",
        "app_owner",
        "--trust-role",
        "my role",
        "--trust-role",
        "app_owner",
        "--trust-schema",
        "a,b",
    )
    server = Server.objects.get(name="db1")
    assert (server.plans_trusted_roles, server.plans_trusted_schemas) == (["app_owner", "my role"], ["a,b"])
    listed = _out(capsys, "servers", "list", "--org", "acme")
    assert "plans trust roles app_owner, my role; schemas a,b" in listed
    (as_json,) = json.loads(_out(capsys, "servers", "list", "--json", "--org", "acme"))
    assert (as_json["plans_trusted_roles"], as_json["plans_trusted_schemas"]) == (["app_owner", "my role"], ["a,b"])

    # On update, any given replaces the list; none given leaves it; --no-trust-... empties it. The password stays.
    call_command("servers", "update", "db1", "--trust-role", "Reporting")
    server = Server.objects.get(name="db1")
    assert (server.plans_trusted_roles, server.plans_trusted_schemas) == (["Reporting"], ["a,b"])
    call_command("servers", "update", "db1", "--no-trust-schemas", "--interval", "30")
    server = Server.objects.get(name="db1")
    assert (server.plans_trusted_roles, server.plans_trusted_schemas, server.interval_s) == (["Reporting"], [], 30)
    assert server.get_password() == "old-secret"
    capsys.readouterr()
    assert (
        _out(capsys, "servers", "list", "--org", "acme")
        .rstrip()
        .endswith("never collected  plans trust roles Reporting")
    )

    with pytest.raises(CommandError, match="plans_trusted_roles: role name 'ééé.*' is 64 bytes in UTF-8"):
        call_command("servers", "update", "db1", "--trust-role", "é" * 32)
    with pytest.raises(CommandError, match="plans_trusted_schemas: a schema name cannot be empty"):
        call_command("servers", "add", "db2", "--dsn", "host=db2.example", "--trust-schema", "")
    assert Server.objects.get(name="db1").plans_trusted_roles == ["Reporting"]
    assert not Server.objects.filter(name="db2").exists()
    with pytest.raises(CommandError, match="not allowed with argument"):
        call_command("servers", "update", "db1", "--trust-role", "x", "--no-trust-roles")
