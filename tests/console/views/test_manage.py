"""The server management pages (/manage/servers/): the list with the actions a role allows, adding,
editing (the password write-only), enabling or disabling, removing with the history, the "test
connection" check as an htmx fragment and as a whole page, access rules and bounded queries."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.core.cache import cache
from django.urls import reverse

from collectors.queued_checks import QUEUE_WAIT_S
from inventory.connection import parse_dsn
from inventory.models import Membership, Organization, Server
from inventory.services import server_create
from tests.conftest import MONITOR_PASSWORD, MONITOR_USER

pytestmark = pytest.mark.django_db

SECRET = "Stored-secret-4417"  # the stored password of every server here: no response may contain it
TYPED = "Typed-secret-8802"
HX = {"HTTP_HX_REQUEST": "true"}


@dataclass
class World:
    acme: Organization
    other: Organization
    db1: Server  # acme
    db2: Server  # acme, a failing one
    elsewhere: Server  # other
    viewer: User  # viewer in acme
    dba: User  # dba in acme
    stranger: User  # admin in other


def _user(name: str, org: Organization | None, role: str | None) -> User:
    user = User.objects.create_user(name, password=f"pw-{name}-1")
    if org is not None:
        Membership.objects.create(user=user, organization=org, role=role)
    return user


@pytest.fixture
def world() -> World:
    db1 = server_create(
        name="db1",
        connection=parse_dsn(f"postgresql://monitor:{SECRET}@db1.example:5432/app"),
        organization_name="acme",
        tags=["prod", "eu"],
    )
    db2 = server_create(
        name="db2",
        connection=parse_dsn(f"postgresql://monitor:{SECRET}@db2.example:6432/shop"),
        organization_name="acme",
    )
    Server.objects.filter(pk=db2.pk).update(
        consecutive_failures=3,
        last_error_class="unreachable",
        last_error_message="cannot connect to db2.example",
        last_attempt_at="2025-01-01T00:00Z",
    )
    elsewhere = server_create(
        name="hidden-db", connection=parse_dsn(f"postgresql://m:{SECRET}@hidden.example/app"), organization_name="other"
    )
    acme, other = db1.organization, elsewhere.organization
    return World(
        acme,
        other,
        db1,
        db2,
        elsewhere,
        _user("vic", acme, Membership.Role.VIEWER),
        _user("dora", acme, Membership.Role.DBA),
        _user("sam", other, Membership.Role.ADMIN),
    )


def body(response) -> str:
    text = response.content.decode()
    assert SECRET not in text and TYPED not in text and MONITOR_PASSWORD not in text
    return text


def plain(html: str) -> str:
    """The page's text without tags (highlighted SQL is cut into spans)."""
    return unescape(re.sub(r"<[^>]+>", "", html))


def stored(server: Server) -> Server:
    return Server.objects.get(pk=server.pk)


def form_data(server: Server | None = None, **changes) -> dict:
    data = {
        "organization": server.organization_id if server else "",
        "name": "",
        "host": "",
        "port": 5432,
        "database": "postgres",
        "user": "monitor",
        "password": "",
        "sslmode": "prefer",
        "interval_s": 60,
        "cpu_count": "",
        "tags": "",
        "plans_trusted_roles": "",
        "plans_trusted_schemas": "",
        "enabled": "on",
        "ssl_root_cert": "",
        "require_scram": "on",
    }
    if server is not None:
        data.update(
            name=server.name,
            host=server.host,
            port=server.port,
            database=server.database,
            user=server.user,
            sslmode=server.sslmode,
            interval_s=server.interval_s,
            tags=", ".join(server.tags),
            plans_trusted_roles=", ".join(server.plans_trusted_roles),
            plans_trusted_schemas=", ".join(server.plans_trusted_schemas),
            ssl_root_cert=server.ssl_root_cert,
            require_scram="on" if server.require_scram else None,
        )
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


# --- the list -------------------------------------------------------------------------------------------


def test_a_viewer_sees_the_list_read_only(client, world, django_assert_max_num_queries):
    client.force_login(world.viewer)
    client.get(reverse("manage-servers"))  # the session settles on a first request
    with django_assert_max_num_queries(6):
        response = client.get(reverse("manage-servers"))
    html = body(response)
    assert response.status_code == 200
    for shown in ("db1", "db1.example", "5432", "app", "monitor", "prod", "db2.example", "6432", "shop"):
        assert shown in html
    assert "hidden-db" not in html and "hidden.example" not in html  # another organization's
    assert reverse("server-edit", args=[world.db1.pk]) not in html and reverse("server-add") not in html
    assert html.count('<span class="muted">read-only</span>') == 2
    # The failure's class and the console's sentence for it; libpq's words are for console staff.
    assert 'badge failing">failing' in html and "unreachable: The server could not be reached" in html
    assert "cannot connect to db2.example" not in html
    assert 'badge never">never collected' in html
    assert "GRANT pg_monitor TO pgconsole_monitor;" in plain(html)  # the monitoring role's SQL


def test_a_dba_gets_the_actions(client, world, django_assert_max_num_queries):
    bulk = [
        server_create(
            name=f"bulk-{n}",
            connection=parse_dsn(f"postgresql://m:{SECRET}@bulk{n}.example/app"),
            organization_name="acme",
        )
        for n in range(20)
    ]
    client.force_login(world.dba)
    client.get(reverse("manage-servers"))
    with django_assert_max_num_queries(6):
        html = body(client.get(reverse("manage-servers")))
    assert reverse("server-add") in html
    for server in (world.db1, world.db2):
        assert reverse("server-edit", args=[server.pk]) in html
        assert reverse("server-enabled", args=[server.pk]) in html
        assert f'action="{reverse("server-remove", args=[server.pk])}" class="inline" data-confirm="Remove ' in html
    assert all(reverse("server-edit", args=[server.pk]) in html for server in bulk)


# --- adding ---------------------------------------------------------------------------------------------


def test_a_dba_adds_a_server_whose_password_is_stored_but_never_shown(client, world):
    client.force_login(world.dba)
    page = client.get(reverse("server-add"))
    assert page.status_code == 200 and 'name="password"' in body(page)
    data = form_data(
        organization=world.acme.pk,
        name="db3",
        host="db3.example",
        port=5433,
        database="app",
        password=TYPED,
        tags="prod, eu, prod",
        cpu_count=8,
        enabled=None,
    )
    response = client.post(reverse("server-add"), data)
    assert response.status_code == 302 and response.headers["Location"] == reverse("manage-servers")
    server = Server.objects.get(organization=world.acme, name="db3")
    assert (server.host, server.port, server.database, server.user, server.cpu_count) == (
        "db3.example",
        5433,
        "app",
        "monitor",
        8,
    )
    assert server.tags == ["prod", "eu"] and server.enabled is False
    assert server.get_password() == TYPED and TYPED not in server.password_encrypted
    body(client.get(reverse("manage-servers")))
    body(client.get(reverse("server-edit", args=[server.pk])))


def test_adding_refuses_a_duplicate_name_and_an_organization_not_managed(client, world):
    client.force_login(world.dba)
    duplicate = client.post(
        reverse("server-add"), form_data(organization=world.acme.pk, name="db1", host="x.example", password=TYPED)
    )
    assert duplicate.status_code == 400 and "already exists" in body(duplicate)
    foreign = client.post(
        reverse("server-add"), form_data(organization=world.other.pk, name="sneaky", host="x.example")
    )
    assert foreign.status_code == 400 and "Select a valid choice" in body(foreign)
    assert not Server.objects.filter(name="sneaky").exists()


def test_a_viewer_may_not_add(client, world):
    client.force_login(world.viewer)
    assert client.get(reverse("server-add")).status_code == 403
    response = client.post(reverse("server-add"), form_data(organization=world.acme.pk, name="v", host="v.example"))
    assert response.status_code == 403 and not Server.objects.filter(name="v").exists()


# --- editing --------------------------------------------------------------------------------------------


def test_editing_keeps_the_stored_password_unless_the_connection_moves(client, world, django_assert_max_num_queries):
    client.force_login(world.dba)
    url = reverse("server-edit", args=[world.db1.pk])
    client.get(url)  # the session settles on a first request
    with django_assert_max_num_queries(6):
        page = body(client.get(url))
    assert 'value="db1.example"' in page and "(one is stored)" in page and 'name="password"' in page
    assert world.db1.password_encrypted not in page

    renamed = client.post(url, form_data(world.db1, name="db1-renamed", interval_s=30))
    assert renamed.status_code == 302 and renamed.headers["Location"] == reverse("manage-servers")
    assert stored(world.db1).name == "db1-renamed" and stored(world.db1).interval_s == 30
    assert stored(world.db1).get_password() == SECRET

    moved = client.post(url, form_data(stored(world.db1), host="db9.example"), follow=True)
    assert stored(world.db1).host == "db9.example" and stored(world.db1).get_password() is None
    html = body(moved)
    assert moved.redirect_chain[-1][0] == url  # back to the form, to type the password again
    cleared = "The stored password of db1-renamed was cleared because its organization, host, port, database, role"
    assert f"{cleared}, TLS or SCRAM settings changed" in html

    retyped = client.post(url, form_data(stored(world.db1), password=TYPED))
    assert retyped.status_code == 302 and stored(world.db1).get_password() == TYPED


def test_the_names_trusted_for_plans_are_set_shown_and_changed_without_the_password(client, world):
    client.force_login(world.dba)
    added = client.post(
        reverse("server-add"),
        form_data(
            organization=world.acme.pk,
            name="db3",
            host="db3.example",
            password=TYPED,
            plans_trusted_roles="app_owner, Reporting, app_owner",
            plans_trusted_schemas="ext schema",
        ),
    )
    assert added.status_code == 302, body(added)
    server = Server.objects.get(organization=world.acme, name="db3")
    assert (server.plans_trusted_roles, server.plans_trusted_schemas) == (["app_owner", "Reporting"], ["ext schema"])

    url = reverse("server-edit", args=[server.pk])
    page = body(client.get(url))
    assert "Trusted roles (plans)" in page and "Trusted schemas (plans)" in page
    assert 'value="app_owner, Reporting"' in page and 'value="ext schema"' in page
    assert "Name only roles whose code may safely run as the monitoring role." in page

    edited = client.post(url, form_data(server, plans_trusted_roles="Reporting", plans_trusted_schemas=""))
    assert edited.status_code == 302 and edited.headers["Location"] == reverse("manage-servers")
    assert (stored(server).plans_trusted_roles, stored(server).plans_trusted_schemas) == (["Reporting"], [])
    assert stored(server).get_password() == TYPED  # not a connection field: the password stays

    refused = client.post(url, form_data(stored(server), plans_trusted_roles="x" * 64))
    assert refused.status_code == 400
    assert f"role name &#x27;{'x' * 64}&#x27; is 64 bytes in UTF-8" in body(refused)
    assert stored(server).plans_trusted_roles == ["Reporting"]


def test_forgetting_the_stored_password(client, world):
    client.force_login(world.dba)
    response = client.post(reverse("server-edit", args=[world.db2.pk]), form_data(world.db2, forget_password="on"))
    assert response.status_code == 302 and stored(world.db2).get_password() is None
    assert any("cleared as asked" in m for m in messages_of(response))


def test_an_invalid_edit_changes_nothing(client, world):
    client.force_login(world.dba)
    response = client.post(reverse("server-edit", args=[world.db1.pk]), form_data(world.db1, name="db2", port=70000))
    assert response.status_code == 400 and "Ensure this value is less than or equal to 65535" in body(response)
    response = client.post(reverse("server-edit", args=[world.db1.pk]), form_data(world.db1, name="db2"))
    assert response.status_code == 400
    assert stored(world.db1).name == "db1" and stored(world.db1).get_password() == SECRET


def test_edit_access(client, world):
    url = reverse("server-edit", args=[world.db1.pk])
    client.force_login(world.viewer)
    assert client.get(url).status_code == 403
    assert client.post(url, form_data(world.db1, name="by-viewer")).status_code == 403
    client.force_login(world.stranger)  # admin, but of another organization
    assert client.get(url).status_code == 404
    assert client.post(url, form_data(world.db1, name="by-stranger")).status_code == 404
    assert client.post(url, form_data(world.db1, action="check"), **HX).status_code == 404
    assert stored(world.db1).name == "db1"


# --- enable, disable, remove ----------------------------------------------------------------------------


def test_disable_and_enable(client, world):
    client.force_login(world.dba)
    url = reverse("server-enabled", args=[world.db1.pk])
    assert client.get(url).status_code == 405
    response = client.post(url, {"enabled": "0"})
    assert response.status_code == 302 and stored(world.db1).enabled is False
    assert any("db1 is disabled" in m for m in messages_of(response))
    assert 'badge disabled">disabled' in body(client.get(reverse("manage-servers")))
    client.post(url, {"enabled": "1"})
    assert stored(world.db1).enabled is True and stored(world.db1).get_password() == SECRET


def test_enable_and_remove_access(client, world):
    for user, status in ((world.viewer, 403), (world.stranger, 404)):
        client.force_login(user)
        assert client.post(reverse("server-enabled", args=[world.db1.pk]), {"enabled": "0"}).status_code == status
        assert client.post(reverse("server-remove", args=[world.db1.pk])).status_code == status
    assert stored(world.db1).enabled is True


def test_removing_a_server_removes_its_history(client, collected_server, history_rows):
    gone, kept = collected_server("gone"), collected_server("kept")
    kept_rows = history_rows(kept.pk)
    dba = _user("remover", gone.organization, Membership.Role.DBA)
    client.force_login(dba)
    assert client.get(reverse("server-remove", args=[gone.pk])).status_code == 405
    response = client.post(reverse("server-remove", args=[gone.pk]))
    assert response.status_code == 302
    assert "gone was removed, with its whole history." in messages_of(response)
    assert not Server.objects.filter(pk=gone.pk).exists()
    assert set(history_rows(gone.pk).values()) == {0}
    assert history_rows(kept.pk) == kept_rows


# --- test connection ------------------------------------------------------------------------------------
# The page queues the check and polls it (collectors.queued_checks); check_worker is a real worker serving the queue.

POLL = re.compile(r'<section id="check-result"[^>]*hx-get="([^"]+)"')


def checked(client, response, *, timeout_s: float = 30) -> str:
    """The check's fragment once the worker is done: polled as the page's htmx does while it says pending."""
    html = body(response)
    assert response.status_code == 200 and html.lstrip().startswith('<section id="check-result"'), html
    found = POLL.search(html)
    assert found, f"the queued check's fragment does not poll: {html}"
    url, deadline = unescape(found.group(1)), time.monotonic() + timeout_s
    while POLL.search(html) and time.monotonic() < deadline:
        time.sleep(0.2)
        polled = client.get(url, **HX)
        assert polled.status_code == 200
        html = body(polled)
    assert not POLL.search(html), f"still pending after {timeout_s} s: {html}"
    return html


def typed_check(world: World, port: int, **changes) -> dict:
    """The add form filled in with a connection to 127.0.0.1:`port` as the monitoring role, to test."""
    fields = dict(
        organization=world.acme.pk,
        name="real",
        host="127.0.0.1",
        port=port,
        database="app",
        user=MONITOR_USER,
        password=MONITOR_PASSWORD,
        action="check",
    )
    return form_data(**{**fields, **changes})


def test_the_check_of_a_new_server_is_queued_then_polled(client, world, pg_clusters, check_worker):
    client.force_login(world.dba)
    response = client.post(reverse("server-add"), typed_check(world, pg_clusters[17].port), **HX)
    queued = body(response)
    assert "<html" not in queued and ("queued" in queued or "connecting" in queued)
    assert f"Testing {MONITOR_USER}@127.0.0.1:{pg_clusters[17].port}/app" in queued
    html = checked(client, response)
    assert 'badge ok">ready' in html and "PostgreSQL 17." in html
    assert "pg_stat_statements 1.11" in html and "pg_read_all_stats" in html
    assert 'class="kw">ALTER</span>' in html  # the fix, highlighted
    assert "ALTER SYSTEM SET pg_stat_statements.track_planning = on;" in plain(html)
    assert not Server.objects.filter(name="real").exists()  # a check saves nothing


def test_the_check_without_javascript_has_a_page_of_its_own(client, world, pg_clusters, check_worker):
    client.force_login(world.dba)
    response = client.post(reverse("server-add"), typed_check(world, pg_clusters[17].port, database="postgres"))
    html = body(response)
    assert response.status_code == 200 and "<html" in html and 'name="host"' in html
    assert 'value="127.0.0.1"' in html  # the typed fields come back, the password does not
    link = re.search(r'<noscript><p>The check runs on a worker: <a href="([^"]+)">see its result</a>', html)
    assert link, html
    deadline = time.monotonic() + 30
    while 'http-equiv="refresh"' in (page := body(client.get(link.group(1)))) and time.monotonic() < deadline:
        time.sleep(0.2)  # the page reloads itself (every 2 s in a browser) while the check runs
    assert "<html" in page and 'http-equiv="refresh"' not in page
    assert "connected, not ready" in page and "not created in database &#x27;postgres&#x27;" in page
    assert "-- in database postgres, as a superuser:\nCREATE EXTENSION IF NOT EXISTS pg_stat_statements;" in plain(page)
    assert f'href="{reverse("server-add")}"' in page  # back to the form


def test_the_check_of_a_stored_server_uses_its_password_only_where_it_was_given(
    client, world, pg_clusters, check_worker
):
    port = pg_clusters[17].port
    server = server_create(
        name="real",
        connection=parse_dsn(f"postgresql://{MONITOR_USER}:{MONITOR_PASSWORD}@127.0.0.1:{port}/app"),
        organization_name="acme",
    )
    client.force_login(world.dba)
    url = reverse("server-edit", args=[server.pk])
    same = checked(client, client.post(url, form_data(server, action="check"), **HX))
    assert "Tested with the stored password." in same and 'badge ok">ready' in same
    # To another database: the stored password stays home, and the server asks for one.
    moved = checked(client, client.post(url, form_data(server, database="postgres", action="check"), **HX))
    assert "Tested without a password" in moved and "cannot connect: authentication" in moved
    assert stored(server).database == "app" and stored(server).get_password() == MONITOR_PASSWORD


def test_the_check_reports_a_wrong_password_and_a_closed_port(client, world, pg_clusters, check_worker):
    client.force_login(world.dba)
    base = typed_check(world, pg_clusters[17].port)
    wrong = checked(client, client.post(reverse("server-add"), {**base, "password": TYPED}, **HX))
    assert "cannot connect: authentication" in wrong and "refused the password of role" in wrong
    refused = checked(client, client.post(reverse("server-add"), {**base, "port": 1, "password": TYPED}, **HX))
    assert "cannot connect: refused" in refused and "Nothing accepts connections at 127.0.0.1:1" in refused
    # A DBA who is not console staff sees the class and the console's words: not libpq's text, nor how long a
    # failed connection took (both would map the console's network); console staff see both.
    assert "password authentication failed" not in wrong and " ms" not in wrong and "Connection refused" not in refused
    world.dba.is_staff = True
    world.dba.save()
    refused = checked(client, client.post(reverse("server-add"), {**base, "port": 1, "password": TYPED}, **HX))
    assert "Connection refused" in refused and re.search(r"127\.0\.0\.1:1/app · \d+ ms", refused)


def test_a_check_is_read_by_its_organization_s_dbas_only(client, world):
    """Who may poll a check, and what one that no worker took says after the wait."""
    client.force_login(world.dba)
    data = typed_check(world, 1, password=TYPED)
    url = unescape(POLL.search(body(client.post(reverse("server-add"), data, **HX))).group(1))
    assert client.get(url, **HX).status_code == 200
    client.force_login(world.viewer)  # acme, but may not test connections
    assert client.get(url, **HX).status_code == 403
    client.force_login(world.stranger)  # another organization's admin
    assert client.get(url, **HX).status_code == 404 and client.get(url).status_code == 404
    client.force_login(world.dba)
    assert client.get(reverse("connection-check", args=["7c4d2b9e-0000-4000-8000-000000000000"])).status_code == 404
    check_id = url.rstrip("/").rsplit("/", 1)[1]
    entry = cache.get(f"connection-check:{check_id}")
    # As if no worker had taken it (this module's worker may have): the page gives it up after the wait.
    aged = {
        **entry,
        "status": "queued",
        "started_at": None,
        "report": None,
        "queued_at": entry["queued_at"] - QUEUE_WAIT_S - 1,
    }
    cache.set(f"connection-check:{check_id}", aged)
    lost = body(client.get(url, **HX))
    assert not POLL.search(lost) and 'badge failing">not checked' in lost
    assert f"No worker took the check within {QUEUE_WAIT_S} s" in lost


def test_the_check_of_an_incomplete_form_says_what_to_fix(client, world):
    client.force_login(world.dba)
    response = client.post(reverse("server-add"), form_data(organization=world.acme.pk, action="check"), **HX)
    html = body(response)
    assert response.status_code == 200 and html.lstrip().startswith('<section id="check-result"')
    assert "Fix the form first" in html and "Host: This field is required." in html


def test_a_viewer_may_not_check(client, world):
    client.force_login(world.viewer)
    url = reverse("server-edit", args=[world.db1.pk])
    assert client.post(url, form_data(world.db1, action="check"), **HX).status_code == 403


def test_connection_checks_are_limited_per_user(client, world, settings):
    """A check dials a server from a worker: a runaway script gets a clear 429, not a queue of checks."""
    settings.PAGE_RATES = {**settings.PAGE_RATES, "check": "2/min"}
    client.force_login(world.dba)
    incomplete = form_data(organization=world.acme.pk, action="check")
    assert [client.post(reverse("server-add"), incomplete, **HX).status_code for _ in range(2)] == [200, 200]
    refused = client.post(reverse("server-add"), incomplete, **HX)
    html = body(refused)
    # 200: htmx swaps in only a successful answer (the browser test shows it); 429 without htmx.
    assert refused.status_code == 200 and html.lstrip().startswith('<section id="check-result"')
    assert re.search(r"Too many connection checks in a minute: try again in \d+ s\.", plain(html))
    assert client.post(reverse("server-add"), incomplete).status_code == 429
    other = _user("dina", world.acme, Membership.Role.DBA)  # another user has a budget of their own
    client.force_login(other)
    assert client.post(reverse("server-add"), incomplete, **HX).status_code == 200
