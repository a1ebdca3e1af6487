"""/api/v1/servers/<id>/tables/ and /indexes/ for a real server collected through the schema reading: the largest
first, paged, with the window's scans and writes and each database's last reading (why one was not read in the
console's words, libpq's to console staff; the databases past the cap counted); CSV too; members only."""

from __future__ import annotations

import csv
import io
import time

import pytest
from django.contrib.auth import get_user_model

from inventory.models import Membership
from tests.api_world import assert_error
from tests.console.api.schema_check import CheckedClient
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)
FULL_DB = "apix_full"  # CONNECT granted, a connection limit of 0: libpq says why, with the server's address
SENTENCE = "The console could not connect to this database, or the connection was lost."


@pytest.fixture
def server(api_world, pg_clusters, settings):
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}
    c = pg_clusters[14]
    c.execute(
        "DROP TABLE IF EXISTS apix_big, apix_small; "
        "CREATE TABLE apix_big (id int PRIMARY KEY, v int); "
        "INSERT INTO apix_big SELECT g, g FROM generate_series(1, 5000) g; "
        "CREATE INDEX apix_big_v ON apix_big (v) WHERE v > 10; CREATE TABLE apix_small (id int PRIMARY KEY)",
        dbname="app",
    )
    server = register(c, org=api_world.acme.name)
    collect(server)
    run(c, "INSERT INTO apix_small VALUES (1), (2)")
    run(c, "SELECT * FROM apix_big WHERE id = 4", 2)
    for _ in range(100):  # on 14 the statistics collector hears of the backends' counts a moment after they end
        if c.execute("SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'apix_small'", dbname="app")[0][0]:
            break
        time.sleep(0.05)
    collect(server)
    return server


def test_tables_and_indexes_largest_first_with_the_windows_figures(api_world, server):
    viewer = api_world.client("viewer", read_only=True)
    body = viewer.get(f"/api/v1/servers/{server.pk}/tables/", {"since": "1h", "page_size": 500}).json()
    assert body["read_at"] is not None and {d["name"] for d in body["databases"] if d["ok"]} >= {"app", "postgres"}
    names = [t["name"] for t in body["results"]]
    assert names.index("apix_big") < names.index("apix_small")  # the largest first
    small = next(t for t in body["results"] if t["name"] == "apix_small")
    assert (small["n_tup_ins"], small["indexes"], small["database"]) == (2, 1, "app")
    assert small["index_writes_per_day"] is None  # seconds of readings: no rate a day yet
    indexes = viewer.get(f"/api/v1/servers/{server.pk}/indexes/", {"since": "1h", "page_size": 500}).json()
    by_name = {i["name"]: i for i in indexes["results"]}
    assert by_name["apix_big_pkey"]["scans"] == 2 and by_name["apix_big_pkey"]["is_primary"]
    partial = by_name["apix_big_v"]
    assert partial["partial"] and partial["key_columns"] == ["v"] and partial["scans"] == 0
    assert partial["definition"] == "CREATE INDEX apix_big_v ON public.apix_big USING btree (v) WHERE (v > 10)"
    one = viewer.get(f"/api/v1/servers/{server.pk}/indexes/", {"page_size": 1}).json()
    assert one["count"] == indexes["count"] and len(one["results"]) == 1 and one["pages"] == indexes["count"]
    rows = list(
        csv.DictReader(
            io.StringIO(viewer.get(f"/api/v1/servers/{server.pk}/indexes/?format=csv&page_size=500").content.decode())
        )
    )
    assert {r["name"] for r in rows} == set(by_name)


def test_a_bad_window_is_a_400_and_an_outsider_a_404(api_world, server):
    viewer = api_world.client("viewer")
    assert_error(viewer.get(f"/api/v1/servers/{server.pk}/tables/", {"since": "soon"}), 400)
    assert_error(api_world.client("outsider").get(f"/api/v1/servers/{server.pk}/indexes/"), 404)


def _databases(c) -> list[str]:
    return [
        name
        for (name,) in c.execute(
            "SELECT datname FROM pg_database WHERE NOT datistemplate AND datallowconn "
            "ORDER BY datname <> 'app', datname"
        )
    ]


def test_why_a_database_was_not_read_is_the_consoles_sentence_but_to_staff(api_world, server, pg_clusters, settings):
    c = pg_clusters[14]
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_MAX_DATABASES": 1000}
    c.execute(f"DROP DATABASE IF EXISTS {FULL_DB}")
    c.execute(f"CREATE DATABASE {FULL_DB} CONNECTION LIMIT 0")
    try:
        collect(server)
    finally:
        c.execute(f"DROP DATABASE IF EXISTS {FULL_DB}")
    url = f"/api/v1/servers/{server.pk}/indexes/"
    body = api_world.client("viewer").get(url).json()
    (full,) = [d for d in body["databases"] if d["name"] == FULL_DB]
    assert (full["ok"], full["code"], full["error"]) == (False, "unreachable", SENTENCE)
    assert (body["databases_total"], body["databases_cap"], body["databases_not_read"]) == (None, None, [])
    staff = get_user_model().objects.create_user("apix-staff", password="x", is_staff=True)
    Membership.objects.create(organization=api_world.acme, user=staff, role="viewer")
    client = CheckedClient()
    client.force_login(staff)
    (full,) = [d for d in client.get(url).json()["databases"] if d["name"] == FULL_DB]
    assert "too many connections" in full["error"] and "127.0.0.1" in full["error"]


def test_the_databases_past_the_cap_are_counted_and_the_first_named(api_world, server, pg_clusters, settings):
    every = _databases(pg_clusters[14])
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_MAX_DATABASES": 1}
    collect(server)
    body = api_world.client("viewer").get(f"/api/v1/servers/{server.pk}/tables/").json()
    assert [d["name"] for d in body["databases"]] == ["app"]
    assert (body["databases_total"], body["databases_cap"]) == (len(every), 1)
    assert body["databases_not_read"] == every[1:6]
