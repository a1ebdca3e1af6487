"""The Indexes page in a real browser, for a real server collected through the schema reading: reached from the
server's pages, what each database's reading gave (a refused one said), the index advice with its DDL, the tables
and indexes by size with the range's scans and writes, and a definition carrying markup shown as text."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db.models import F
from playwright.sync_api import expect

from advisor.services import server_advise
from history.models import SchemaIndex
from tests.world import collect, register, run

REFUSED_DB = "ixbrowser_refused"


@pytest.fixture
def indexed(pg_clusters, settings, transactional_db):
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}
    c = pg_clusters[16]
    c.execute(
        "DROP TABLE IF EXISTS ixb_orders; "
        "CREATE TABLE ixb_orders (id int PRIMARY KEY, customer int, note text); "
        "INSERT INTO ixb_orders SELECT g, g % 90, 'n' FROM generate_series(1, 4000) g; "
        "CREATE INDEX ixb_orders_customer ON ixb_orders (customer); "
        "CREATE INDEX ixb_orders_customer_note ON ixb_orders (customer, note); "
        "CREATE INDEX ixb_orders_flagged ON ixb_orders (id) WHERE note = '<script>x</script>'; ANALYZE ixb_orders",
        dbname="app",
    )
    c.execute(f"DROP DATABASE IF EXISTS {REFUSED_DB}")
    c.execute(f"CREATE DATABASE {REFUSED_DB}")
    c.execute(f"REVOKE CONNECT ON DATABASE {REFUSED_DB} FROM PUBLIC")
    server = register(c, org="acme")
    collect(server)
    run(c, "INSERT INTO ixb_orders SELECT g, 1, 'm' FROM generate_series(4001, 4025) g")
    run(c, "SELECT * FROM ixb_orders WHERE id = 9", 3)
    for _ in range(100):  # the backends' counts reach the shared statistics as they end
        if (
            c.execute("SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'ixb_orders'", dbname="app")[0][0]
            == 4025
        ):
            break
        time.sleep(0.05)
    collect(server)
    SchemaIndex.objects.filter(server_id=server.pk, table_name="ixb_orders").update(
        stats_since=F("stats_since") - timedelta(days=9)
    )
    server_advise(server_id=server.pk)
    yield server
    c.execute(f"DROP DATABASE IF EXISTS {REFUSED_DB}")


def test_the_indexes_page_from_the_servers_nav(console_page, indexed):
    page = console_page
    page.goto(f"/servers/{indexed.pk}/statements/?range=1h")
    page.locator("nav.server-nav").get_by_role("link", name="Indexes").click()
    expect(page.get_by_role("heading", name="Tables and indexes")).to_be_visible()
    expect(page.locator("li.database.unread")).to_contain_text(
        f"{REFUSED_DB}: not read: the monitoring role may not connect"
    )
    expect(page.locator("li.database.read").filter(has_text="app:")).to_be_visible()
    advice = page.locator("section.index-advice li")
    expect(advice.filter(has_text="Index ixb_orders_customer on ixb_orders")).to_have_count(1)
    expect(page.locator("section.index-advice pre.change").first).to_contain_text("DROP INDEX CONCURRENTLY public.")
    orders = page.locator("#tables tbody tr").filter(has_text="public.ixb_orders")
    expect(orders.locator("td").nth(7)).to_have_text("25 / 0 (0 HOT) / 0")
    pkey = page.locator("#indexes tbody tr").filter(has_text="public.ixb_orders_pkey")
    expect(pkey.locator("td").nth(4)).to_have_text("3")
    flagged = page.locator("#indexes tbody tr").filter(has_text="public.ixb_orders_flagged")
    expect(flagged.locator("td code")).to_contain_text("'<script>x</script>'::text")  # shown as text, never run
