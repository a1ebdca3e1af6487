"""The advisor on real servers with real workloads: collections, then `server_advise`, then what is stored."""

from __future__ import annotations

import json
import threading
import time
from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command

from advisor import sources
from advisor.models import Recommendation, Status
from advisor.selectors import recommendations
from advisor.services import server_advise
from devenv import workloads
from tests.world import collect, register

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _collect_during(server, work, *, seconds: float, every: float = 2.0) -> None:
    """Run `work(stop)` in a thread while collecting `server` every `every` seconds."""
    stop = threading.Event()
    thread = threading.Thread(target=work, args=(stop,), daemon=True)
    collect(server)  # baseline
    thread.start()
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(every)
            collect(server)
    finally:
        stop.set()
        thread.join(30)
    collect(server)


def _storm(dsn: str):
    def work(stop: threading.Event) -> None:
        workloads.dealloc_storm(dsn, stop, clients=16, tables=128, tx_per_s=20.0)

    return work


def _rule(server, code: str) -> list:
    return [r for r in recommendations(server_ids=[server.pk]) if r.rule == code]


def test_dealloc_storm_at_max_100_is_critical_with_a_value_and_its_rate(evict_cluster):
    server = register(evict_cluster)
    _collect_during(server, _storm(evict_cluster.dsn("app")), seconds=10)
    out = server_advise(server_id=server.pk)
    assert not out.error
    raised = [r for r in _rule(server, "pgss_max") if r.subject == "server"]
    assert len(raised) == 1, _rule(server, "pgss_max")
    rec = raised[0]
    assert rec.severity == "critical"
    value = int(rec.change_text.removeprefix("ALTER SYSTEM SET pg_stat_statements.max = ").rstrip(";"))
    assert value >= 5000 and value % 5000 == 0
    assert rec.change_apply == "restart"
    # The measured rate is in the explanation, and agrees with the server's own counter.
    with psycopg.connect(evict_cluster.dsn("app"), autocommit=True) as conn:
        dealloc = conn.execute("SELECT dealloc FROM pg_stat_statements_info").fetchone()[0]
    assert dealloc > 100
    assert "Sustained deallocation of" in rec.explanation and "/s" in rec.explanation
    rate = float(rec.explanation.split("Sustained deallocation of ")[1].split("/s")[0])
    assert rate > 10
    # The evidence series is the dealloc/s chart.
    assert rec.evidence and rec.evidence[0]["unit"] == "dealloc/s"
    assert any(v and v > 10 for _, v in rec.evidence[0]["points"])
    # max = 100 is below the default: the raise says so (one recommendation, not two with the same change).
    assert "never lower it" in rec.explanation
    assert [r.subject for r in _rule(server, "pgss_max")] == ["server"]

    # On demand: `manage.py advise` evaluates again and prints the same advice with its numbers ...
    text = StringIO()
    call_command("advise", "--server", server.name, stdout=text)
    assert f"[critical] pgss_max server: {rec.title.split(' to ')[0]}" in text.getvalue()
    assert "change (restart): ALTER SYSTEM SET pg_stat_statements.max = " in text.getvalue()
    # ... and --json gives every field.
    doc = StringIO()
    call_command("advise", "--server", server.name, "--json", stdout=doc)
    (entry,) = json.loads(doc.getvalue())
    assert entry["server"] == server.name and entry["partial"] is False and entry["evaluated_at"]
    by_key = {(r["rule"], r["subject"]): r for r in entry["recommendations"]}
    full = by_key[("pgss_max", "server")]
    assert full["severity"] == "critical" and full["change_text"] == rec.change_text
    for name in (
        "title",
        "explanation",
        "change_apply",
        "effect",
        "cost",
        "evidence",
        "references",
        "status",
        "first_seen_at",
        "last_seen_at",
    ):
        assert full[name], name
    assert full["references"] == [sources.DALIBO_SLOW_COMMIT, sources.PGSS_DOCS]
    with pytest.raises(CommandError, match="no server named"):
        call_command("advise", "--server", "no-such-server")


def test_the_same_storm_at_max_5000_raises_nothing_from_rule_1(pg_clusters):
    c = pg_clusters[14]  # pg_stat_statements.max at its default, 5000
    server = register(c)
    _collect_during(server, _storm(c.dsn("app")), seconds=6)
    assert not server_advise(server_id=server.pk).error
    assert _rule(server, "pgss_max") == []
    assert not Recommendation.objects.filter(server=server, rule="pgss_max").exists()


def test_lifecycle_on_a_real_server_clears_after_the_condition_is_gone(evict_cluster):
    """Raised, then (no more storm, time moved past clear_after) resolved automatically, with its history."""
    from datetime import timedelta

    from django.utils import timezone

    server = register(evict_cluster)
    _collect_during(server, _storm(evict_cluster.dsn("app")), seconds=6)
    server_advise(server_id=server.pk)
    rec = Recommendation.objects.get(server=server, rule="pgss_max", subject="server")
    assert rec.status == Status.OPEN
    # Three hours later nothing is collected (no history in the last hour): the condition is not seen.
    later = timezone.now() + timedelta(hours=3)
    server_advise(server_id=server.pk, now=later)
    rec.refresh_from_db()
    assert rec.status == Status.RESOLVED and rec.resolved_by is None
    assert [e.kind for e in rec.events.all()] == ["opened", "cleared"]
