"""The Indexes page (/servers/<id>/indexes/) of a real server collected through the schema reading: what each
database's last reading said (read, refused: libpq's words to console staff only; the databases past the cap
counted), the index advice, the tables and indexes by size with their scans and writes over the range, escaped
definitions; members only, others get a 404."""

from __future__ import annotations

import html as htmllib
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db.models import F
from django.urls import reverse

from advisor.services import server_advise
from history.models import SchemaIndex
from inventory.models import Membership
from tests.world import collect, register, run, settled

pytestmark = pytest.mark.django_db(transaction=True)
REFUSED_DB = "ixpage_refused"
FULL_DB = "ixpage_full"  # CONNECT granted, a connection limit of 0: libpq says why, with the server's address
SENTENCE = "The console could not connect to this database, or the connection was lost."


@pytest.fixture
def every_reading(settings):
    # Every database of the shared cluster within the cap, whatever other tests left there.
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0, "SCHEMA_MAX_DATABASES": 1000}


@pytest.fixture
def world(pg_clusters, every_reading):
    c = pg_clusters[15]
    c.execute(
        "DROP TABLE IF EXISTS ixp_orders; CREATE TABLE ixp_orders (id int PRIMARY KEY, note text); "
        "INSERT INTO ixp_orders SELECT g, 'n' FROM generate_series(1, 3000) g; "
        # A partial index whose predicate is markup: the page shows it as text.
        "CREATE INDEX ixp_orders_note ON ixp_orders (note) WHERE note <> '<b>x</b>'; ANALYZE ixp_orders",
        dbname="app",
    )
    c.execute(f"DROP DATABASE IF EXISTS {REFUSED_DB}")
    c.execute(f"CREATE DATABASE {REFUSED_DB}")
    c.execute(f"REVOKE CONNECT ON DATABASE {REFUSED_DB} FROM PUBLIC")
    c.execute(f"DROP DATABASE IF EXISTS {FULL_DB}")
    c.execute(f"CREATE DATABASE {FULL_DB} CONNECTION LIMIT 0")
    server = register(c, org="ixpage-org")
    collect(server)
    run(c, "INSERT INTO ixp_orders SELECT g, 'm' FROM generate_series(3001, 3040) g")
    run(c, "SELECT * FROM ixp_orders WHERE id = 3", 2)
    settled(c, "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'ixp_orders'", 3040)
    collect(server)
    SchemaIndex.objects.filter(server_id=server.pk, name="ixp_orders_note").update(
        stats_since=F("stats_since") - timedelta(days=8)
    )
    server_advise(server_id=server.pk)
    viewer = User.objects.create_user("ixpage-viewer", password="pw-ixpage-1")
    Membership.objects.create(user=viewer, organization=server.organization, role=Membership.Role.VIEWER)
    outsider = User.objects.create_user("ixpage-outsider", password="pw-ixpage-2")
    yield server, viewer, outsider
    c.execute(f"DROP DATABASE IF EXISTS {REFUSED_DB}")
    c.execute(f"DROP DATABASE IF EXISTS {FULL_DB}")


def _row(html: str, section: str, name: str) -> list[str]:
    part = html[html.index(f'id="{section}"') :]
    part = part[: part.index("</table>")]
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", part, re.S):
        cells = [
            htmllib.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name} in {section}")


def test_the_page_says_what_each_database_gave_the_advice_and_the_tables_and_indexes(client, world):
    server, viewer, _ = world
    client.force_login(viewer)
    response = client.get(reverse("server-indexes", args=[server.pk]), {"range": "1h"})
    assert response.status_code == 200
    html = response.content.decode()
    assert f"<strong>{REFUSED_DB}</strong>:" in html and "no CONNECT privilege" in html
    assert re.search(r"<strong>app</strong>:\s*\d+ tables?", html)
    # The advice: the planted index, unused over the watch, with its DDL.
    assert "Index ixp_orders_note on ixp_orders was not used in 8 days" in html
    assert "DROP INDEX CONCURRENTLY public.ixp_orders_note;" in html
    table = _row(html, "tables", "public.ixp_orders")
    assert table[1] == "app" and table[7] == "40 / 0 (0 HOT) / 0"  # the range's inserts / updates / deletes
    pkey = _row(html, "indexes", "public.ixp_orders_pkey")
    assert (pkey[4], pkey[8]) == ("2", "primary key")
    partial = _row(html, "indexes", "public.ixp_orders_note")
    assert partial[4] == "0" and "partial" in partial[8]
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html  # the definition escaped
    # The nav of the server's pages links here.
    assert f'href="{reverse("server-indexes", args=[server.pk])}?' in html


def test_an_outsider_gets_a_404_and_an_htmx_request_the_body_only(client, world):
    server, viewer, outsider = world
    client.force_login(outsider)
    assert client.get(reverse("server-indexes", args=[server.pk])).status_code == 404
    client.force_login(viewer)
    body = client.get(reverse("server-indexes", args=[server.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert body.lstrip().startswith('<div id="indexes-body">') and "<html" not in body


def _database(html: str, name: str) -> str:
    """The text of the database's line in the page's list of databases."""
    (line,) = re.findall(rf'<li class="database[^"]*">\s*<strong>{name}</strong>:(.*?)</li>', html, re.S)
    return htmllib.unescape(re.sub(r"<[^>]+>", "", line))


def test_a_viewer_reads_the_consoles_sentence_for_a_database_and_staff_read_libpqs_words(client, world):
    server, viewer, _ = world
    url = reverse("server-indexes", args=[server.pk])
    client.force_login(viewer)
    line = _database(client.get(url).content.decode(), FULL_DB)
    assert SENTENCE in line and "too many connections" not in line and "127.0.0.1" not in line
    assert "no CONNECT privilege" in _database(client.get(url).content.decode(), REFUSED_DB)  # the console's own
    staff = User.objects.create_user("ixpage-staff", password="pw-ixpage-3", is_staff=True)
    Membership.objects.create(user=staff, organization=server.organization, role=Membership.Role.VIEWER)
    client.force_login(staff)
    line = _database(client.get(url).content.decode(), FULL_DB)
    assert "too many connections" in line and "127.0.0.1" in line and SENTENCE not in line


def test_the_page_says_how_many_databases_the_cap_left_unread(client, world, settings, pg_clusters):
    server, viewer, _ = world
    every = [
        name
        for (name,) in pg_clusters[15].execute(
            "SELECT datname FROM pg_database WHERE NOT datistemplate AND datallowconn "
            "ORDER BY datname <> 'app', datname"
        )
    ]
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_MAX_DATABASES": 2}
    collect(server)
    client.force_login(viewer)
    html = client.get(reverse("server-indexes", args=[server.pk]), {"range": "1h"}).content.decode()
    assert re.findall(r'<li class="database[^"]*">\s*<strong>([^<]+)</strong>', html) == every[:2]
    said = htmllib.unescape(re.sub(r"\s+", " ", html[html.index('class="not-tracked databases-capped"') :]))
    said = said[: said.index("</p>")]
    assert f"The server has {len(every)} databases, more than the reading's cap of 2" in said
    assert "(COLLECTOR_SCHEMA_MAX_DATABASES): a reading takes the 2 above" in said
    named = ", ".join(every[2:7]) + (f" and {len(every) - 7} more" if len(every) > 7 else "")
    assert said.endswith(f"{len(every) - 2} {'is' if len(every) == 3 else 'are'} not read: {named}.")
