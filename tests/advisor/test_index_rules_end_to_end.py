"""The index rules (unused, invalid, redundant) on real servers: a known schema and workload collected through the
schema reading, the advice server_advise stores, and its DDL run on the server as a DBA would; the next reading
finds the index gone and the advice resolves. A week of watching is stood in for by moving the stored watch's
start back (the clock of the evidence, as the regression tests move a snapshot's time)."""

import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db.models import F
from django.utils import timezone
from django.utils.html import escape

from advisor.selectors import INDEX_RULES, recommendations
from advisor.services import server_advise
from exports.audit import audit_content
from exports.audit_data import audit_json
from history.models import SchemaIndex
from readtier import Window
from reports.mail import render, weekly_context
from reports.weekly import weekly_report
from reports.weeks import ReportWeek
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)
SCHEMA = (
    "DROP TABLE IF EXISTS ix_orders, ix_dup CASCADE; "
    "CREATE TABLE ix_orders (id int PRIMARY KEY, customer int, status text, code text UNIQUE, note text); "
    "INSERT INTO ix_orders SELECT g, g % 700, (ARRAY['new','paid','sent'])[g % 3 + 1], 'c' || g, 'n' || g "
    "FROM generate_series(1, 20000) g; "
    "CREATE INDEX ix_orders_note ON ix_orders (note); "  # planted: never used
    "CREATE INDEX ix_orders_customer ON ix_orders (customer); "  # planted: a prefix of the next one
    "CREATE INDEX ix_orders_customer_status ON ix_orders (customer, status); "
    "CREATE INDEX ix_orders_code_copy ON ix_orders (code); "  # the same keys as the unique constraint's index
    "CREATE TABLE ix_dup (k int); INSERT INTO ix_dup VALUES (1), (1); "
    "ANALYZE ix_orders"
)


@pytest.fixture
def every_reading(settings):
    settings.COLLECTOR = {**settings.COLLECTOR, "SCHEMA_INTERVAL_S": 0}


def _advice(server) -> dict[str, object]:
    """The index advice about this test's tables (the shared cluster may hold others' tables)."""
    return {
        r.subject: r for r in recommendations(server_ids=[server.pk]) if r.subject.startswith("index:app/public.ix_")
    }


def _run_ddl(c, text: str) -> None:
    """The recommendation's change as a DBA runs it: its comment names the database, its statement is run there."""
    database = text.split("\n")[0].removeprefix("-- in database ").split(" ")[0]
    with psycopg.connect(c.dsn(database), autocommit=True) as conn:
        conn.execute(text)


def _in_the_weekly_report_and_the_audit_export(server, found: dict) -> None:
    """The weekly mail's Indexes section lists the advice with the server's Indexes page; the audit export's
    findings carry each recommendation with its DDL."""
    now = datetime.now(UTC)
    year, week, _ = now.isocalendar()
    so_far = ReportWeek(year, week, "UTC", now + timedelta(seconds=1))
    report = weekly_report(organization_id=server.organization_id, week=so_far, charts=False)
    (section,) = [s for s in report.servers if s.name == server.name]
    assert section.indexes_count == len(recommendations(server_ids=[server.pk], rules=INDEX_RULES)) >= len(found)
    assert {a.title for a in section.indexes} >= {r.title for r in found.values()}
    assert section.indexes_url.endswith(f"/servers/{server.pk}/indexes/")
    _, text, html = render("weekly", weekly_context(report, unsubscribe_url="http://console.test/u"))
    assert f"-- Indexes: {section.indexes_count} recommendations open ({section.indexes_url})" in text
    assert "* Index ix_orders_note on ix_orders was not used in 8 days (warning, since " in text
    assert ">Indexes page</a>" in html and escape(found["index:app/public.ix_orders_customer"].title) in html
    window = Window(now - timedelta(hours=1), now + timedelta(seconds=1))
    doc = audit_json(audit_content(organization_id=server.organization_id, server_ids=[server.pk], window=window))
    exported = {f["subject"]: f for f in doc["findings"]}
    for subject, rec in found.items():
        assert exported[subject]["rule"] == rec.rule and exported[subject]["change"]["text"] == rec.change_text
    assert "DROP INDEX CONCURRENTLY" in exported["index:app/public.ix_orders_note"]["change"]["text"]


@pytest.mark.parametrize("major", [13, 16])
def test_planted_indexes_are_found_their_ddl_runs_and_the_advice_resolves(pg_clusters, every_reading, major):
    c = pg_clusters[major]
    c.execute(SCHEMA, dbname="app")
    c.execute("VACUUM ix_orders", dbname="app")  # all visible: the pair's scans are index-only
    with pytest.raises(psycopg.errors.UniqueViolation), psycopg.connect(c.dsn("app"), autocommit=True) as conn:
        conn.execute("CREATE UNIQUE INDEX CONCURRENTLY ix_dup_k ON ix_dup (k)")  # planted: left invalid
    server = register(c)
    collect(server)
    # Only the pair covers status: an index-only scan of it (the table vacuumed), never of its prefix.
    run(c, "SELECT status FROM ix_orders WHERE customer = 5 AND status = 'new'", 5)
    run(c, "INSERT INTO ix_orders VALUES (20001, 1, 'new', 'c20001', 'x')")
    for _ in range(100):  # on 13 a backend's counts reach the statistics collector a moment after it ends
        scanned = dict(c.execute("SELECT indexrelname, idx_scan FROM pg_stat_user_indexes", dbname="app"))
        if scanned["ix_orders_customer_status"] >= 5:
            break
        time.sleep(0.05)
    assert scanned["ix_orders_customer_status"] >= 5 and scanned["ix_orders_customer"] == 0, scanned
    collect(server)
    SchemaIndex.objects.filter(server_id=server.pk, table_name__startswith="ix_").update(
        stats_since=F("stats_since") - timedelta(days=8)
    )
    server_advise(server_id=server.pk)
    found = _advice(server)
    unused = found["index:app/public.ix_orders_note"]
    assert unused.rule == "unused_index" and "8 days" in unused.title and "ix_orders_note" in unused.change_text
    assert found["index:app/public.ix_dup_k"].title == "Index ix_dup_k on ix_dup is invalid"
    # Unused and redundant both: one card for its one change, with both reasons.
    redundant = found["index:app/public.ix_orders_customer"]
    assert "Also (Index ix_orders_customer on ix_orders duplicates ix_orders_customer_status)" in redundant.explanation
    copy = found["index:app/public.ix_orders_code_copy"]
    assert "the same keys as ix_orders_code_key" in copy.explanation
    # A constraint's index is never proposed, nor an index the workload used.
    assert not any(s.endswith(("_pkey", "_code_key", "ix_orders_customer_status")) for s in found)
    _in_the_weekly_report_and_the_audit_export(server, found)

    for rec in (unused, redundant, copy, found["index:app/public.ix_dup_k"]):
        _run_ddl(c, rec.change_text)
    left = {r[0] for r in c.execute("SELECT indexname FROM pg_indexes WHERE tablename LIKE 'ix_%'", dbname="app")}
    assert left == {"ix_orders_pkey", "ix_orders_code_key", "ix_orders_customer_status"}
    collect(server)
    assert (
        set(
            SchemaIndex.objects.filter(
                server_id=server.pk, table_name__startswith="ix_", gone_at__isnull=True
            ).values_list("name", flat=True)
        )
        == left
    )
    server_advise(server_id=server.pk, now=timezone.now() + timedelta(hours=3))  # past the clear time
    assert _advice(server) == {}
