"""TLS and SCRAM settings as users meet them: servers added before the console required them keep theirs (the
migration) and their pages and the API say what is left open; the add form takes a CA certificate pasted as a
browser sends it, and refuses one it cannot use with the reason on the field."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from devenv import tls as devenv_tls
from inventory.connection import parse_dsn
from inventory.models import Membership, Server
from inventory.services import server_create

SECRET = "Stored-secret-5521"
NO_TLS = "sslmode=prefer: the connection may go without TLS"
NO_SCRAM = "SCRAM is not required: a server, or an impostor, that asks for the password in clear"


def plain(response) -> str:
    html = response.content.decode()
    assert SECRET not in html
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def dba_of(server: Server) -> User:
    user = User.objects.create_user("dora", password="pw-dora-1")
    Membership.objects.create(user=user, organization=server.organization, role=Membership.Role.DBA)
    return user


def old_server(name: str = "legacy") -> Server:
    """A server as the migration leaves one added before: its sslmode (prefer then), no SCRAM required."""
    server = server_create(
        name=name, connection=parse_dsn(f"postgresql://monitor:{SECRET}@db1.example/app"), organization_name="acme"
    )
    Server.objects.filter(pk=server.pk).update(sslmode="prefer", require_scram=False)
    return Server.objects.get(pk=server.pk)


@pytest.mark.django_db
def test_an_old_servers_pages_and_api_say_what_its_connection_leaves_open(client):
    legacy = old_server()
    new = server_create(
        name="new", connection=parse_dsn(f"postgresql://monitor:{SECRET}@db2.example/app"), organization_name="acme"
    )
    client.force_login(dba_of(legacy))

    page = plain(client.get(reverse("server", args=[legacy.pk])))
    assert f"Connection: {NO_TLS}" in page and f"Connection: {NO_SCRAM}" in page
    assert "Connection:" not in plain(client.get(reverse("server", args=[new.pk])))

    listing = client.get(reverse("manage-servers")).content.decode()
    assert re.search(r'<span class="badge weak" title="[^"]*without TLS[^"]*">prefer, no SCRAM</span>', listing)
    assert "<td>require</td>" in listing

    api = client.get(f"/api/v1/servers/{legacy.pk}/").json()
    assert api["sslmode"] == "prefer" and api["require_scram"] is False
    assert [w.split(":")[0] for w in api["warnings"]] == ["sslmode=prefer", "SCRAM is not required"]
    assert client.get(f"/api/v1/servers/{new.pk}/").json()["warnings"] == []


@pytest.mark.django_db
def test_the_api_creates_a_server_that_requires_tls_and_scram_unless_told_otherwise(client):
    legacy = old_server()
    client.force_login(dba_of(legacy))
    created = client.post(
        "/api/v1/servers/",
        {
            "organization": legacy.organization_id,
            "name": "api-made",
            "host": "db3.example",
            "user": "monitor",
            "password": SECRET,
        },
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    assert (created.json()["sslmode"], created.json()["require_scram"]) == ("require", True)
    refused = client.post(
        "/api/v1/servers/",
        {
            "organization": legacy.organization_id,
            "name": "api-bad",
            "host": "db4.example",
            "user": "monitor",
            "sslmode": "require",
            "ssl_root_cert": "system",
        },
        content_type="application/json",
    )
    assert refused.status_code == 400
    assert "with sslmode verify-full only" in refused.json()["errors"]["ssl_root_cert"][0]


@pytest.mark.django_db
def test_the_form_takes_a_ca_certificate_pasted_by_a_browser_and_refuses_a_path(client):
    legacy = old_server()
    client.force_login(dba_of(legacy))
    pem = devenv_tls.ca_pem()
    form = {
        "organization": legacy.organization_id,
        "name": "verified",
        "host": "db5.example",
        "port": 5432,
        "database": "app",
        "user": "monitor",
        "password": SECRET,
        "sslmode": "verify-full",
        "ssl_root_cert": pem.replace("\n", "\r\n"),
        "require_scram": "on",
        "interval_s": 60,
        "cpu_count": "",
        "tags": "",
        "enabled": "on",
        "action": "save",
    }
    assert client.post(reverse("server-add"), form).status_code == 302
    stored = Server.objects.get(name="verified")
    assert stored.ssl_root_cert == pem.strip() and stored.require_scram and stored.get_password() == SECRET

    page = client.post(reverse("server-add"), {**form, "name": "by-path", "ssl_root_cert": "/etc/ssl/ca.pem"})
    assert page.status_code == 400
    assert "a path on the console's machine is not accepted" in plain(page)
    assert not Server.objects.filter(name="by-path").exists()

    added = plain(client.get(reverse("server-add")))
    assert "CA certificate" in added and "Require SCRAM" in added
    assert re.search(r'<option value="require" selected>', client.get(reverse("server-add")).content.decode())


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_an_existing_servers_settings_and_requires_both_of_new_ones():
    executor = MigrationExecutor(connection)
    before, after = [("inventory", "0002_organization_limits")], [("inventory", "0003_server_tls")]
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    organization = apps.get_model("inventory", "Organization").objects.create(name="acme")
    apps.get_model("inventory", "Server").objects.create(
        organization=organization, name="kept", host="db1.example", user="monitor", sslmode="prefer"
    )
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    kept = executor.loader.project_state(after).apps.get_model("inventory", "Server").objects.get(name="kept")
    # Everything that depends on inventory 0003 (and went back with it) is migrated forward again for the tests
    # that come after this one.
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert (kept.sslmode, kept.require_scram, kept.ssl_root_cert) == ("prefer", False, "")
    fresh = Server.objects.create(organization_id=kept.organization_id, name="fresh", host="db2.example", user="m")
    assert (fresh.sslmode, fresh.require_scram) == ("require", True)
