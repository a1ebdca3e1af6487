"""readtier/schema.py through real collections of a real server: each table and index as last read, with its scans
and writes summed over a window and scaled to a day by the time its database's readings cover; what each database's
last reading said."""

import dataclasses
from datetime import timedelta

import pytest
from django.utils import timezone

from readtier import Window, schema_overview
from tests.world import collect, register, run, settled

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def every_reading(settings):
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}


def test_a_servers_tables_and_indexes_with_their_window_of_scans_and_writes(pg_clusters, every_reading):
    c = pg_clusters[15]
    c.execute(
        "DROP TABLE IF EXISTS rs_items; CREATE TABLE rs_items (id int PRIMARY KEY, v int); "
        "CREATE INDEX rs_items_v ON rs_items (v); INSERT INTO rs_items SELECT g, g FROM generate_series(1, 1000) g",
        dbname="app",
    )
    server = register(c)
    collect(server)
    (baseline,) = c.execute(
        "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'rs_items_pkey'", dbname="app"
    )[0]
    window = Window.last(timedelta(hours=1))
    first = schema_overview(server_id=server.pk, window=window)
    items = next(t for t in first.tables if t.name == "rs_items")
    assert items.n_live_tup == 1000 or items.n_live_tup == 0  # the estimate, as the server's statistics hold it
    assert (items.seq_scan, items.n_tup_ins, items.observed_s) == (None, None, 0.0)  # no interval read yet
    assert items.indexes == 2 and items.per_day(items.index_writes) is None
    assert {d.name for d in first.databases if d.ok} >= {"app", "postgres"}
    run(c, "INSERT INTO rs_items SELECT g, g FROM generate_series(1001, 1300) g")
    run(c, "UPDATE rs_items SET v = v + 1 WHERE id <= 50")
    run(c, "SELECT * FROM rs_items WHERE id = 7", 3)
    settled(c, "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'rs_items'", 50)
    scans_sql = "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'rs_items_pkey'"
    (scanned,) = c.execute(scans_sql, dbname="app")[0]
    collect(server)
    window = Window(timezone.now() - timedelta(hours=1), timezone.now())
    now = schema_overview(server_id=server.pk, window=window)
    # A page's overview (the largest few) is the whole one's first rows, counts and sums alike, with every total.
    for k in (1, 3):
        limited = schema_overview(server_id=server.pk, window=window, limit=k)
        assert limited.tables == now.tables[:k] and limited.indexes == now.indexes[:k]
        assert (limited.tables_total, limited.indexes_total) == (len(now.tables), len(now.indexes))
    items = next(t for t in now.tables if t.name == "rs_items")
    assert (items.n_tup_ins, items.n_tup_upd) == (300, 50) and items.index_writes == 350 - items.n_tup_hot_upd
    assert 0 < items.observed_s < 60
    assert items.per_day(items.index_writes) is None  # seconds of readings: no rate a day from a burst
    hours = dataclasses.replace(items, observed_s=2 * 3600.0)
    assert hours.per_day(hours.index_writes) == pytest.approx(hours.index_writes * 12)
    pkey = next(i for i in now.indexes if i.name == "rs_items_pkey")
    assert pkey.scans == scanned - baseline >= 3 and pkey.enforces and pkey.table_writes_per_day is None
    other = next(i for i in now.indexes if i.name == "rs_items_v")
    assert other.scans == 0 and not other.enforces and other.scans_since == 0
    assert now.read_at is not None and not now.in_recovery and now.standbys == 0
    # A window before any reading: nothing summed, nothing scaled.
    before = schema_overview(
        server_id=server.pk, window=Window(timezone.now() - timedelta(days=3), timezone.now() - timedelta(days=2))
    )
    assert next(t for t in before.tables if t.name == "rs_items").n_tup_ins is None
