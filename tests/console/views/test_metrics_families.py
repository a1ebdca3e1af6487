"""console/views/metrics_families.py over figures made by hand: a server's gauges only where the server gives the
figure (no rate without a snapshot in the window, no planning where it is not tracked), its running totals as
counters with when the counting began, tags cut to one bounded label, the console's health only when given, and
the top statements labelled by queryid, database and user, never by their text. (The same families from the real
selectors, and through promtool and a real Prometheus: tests/console/views/test_metrics.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from console.views.metrics_families import TAGS_MAX, FleetCollector, StatementFamilies
from readtier import FleetRow
from readtier.fleet import RunningTotals

NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)


def row(server_id: int, name: str, **changes) -> FleetRow:
    base = {
        "server_id": server_id,
        "name": name,
        "organization": "acme",
        "tags": [],
        "status": "ok",
        "error_class": "",
        "error_message": "",
        "server_version_num": 160000,
        "extension_version": "1.10",
        "last_snapshot_at": NOW - timedelta(seconds=20),
        "snapshots": 5,
        "span_s": 300.0,
        "calls_per_s": 12.0,
        "exec_ms_per_s": 250.0,
        "plan_ms_per_s": None,
        "planning": "not tracked",
        "dealloc_per_s": 0.0,
        "entries_peak": 900,
        "entries_max": 5000,
        "trend_calls_per_s": [],
        "last_collection_s": 0.4,
    }
    return FleetRow(**{**base, **changes})


def written(*collectors) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def names_of(found: dict, server: str) -> set[str]:
    return {name for name, labels in found if ("server", server) in labels}


def test_a_servers_gauges_only_where_it_gives_the_figure():
    rows = [row(1, "tracked", plan_ms_per_s=5.0), row(2, "untracked"), row(3, "new", span_s=0, status="stale")]
    found = written(FleetCollector(rows, {}, {}, {1: {"Lock": 30.0}}, NOW))
    labels = (("organization", "acme"), ("server", "tracked"), ("tags", ""))
    assert found[("pgconsole_server_execution_seconds_per_second", labels)] == 0.25
    assert found[("pgconsole_server_planning_seconds_per_second", labels)] == 0.005
    assert (
        found[("pgconsole_server_wait_active_sessions", (*labels[:2], labels[2], ("wait_event_type", "Lock")))] == 0.1
    )
    assert found[("pgconsole_server_last_snapshot_age_seconds", labels)] == 20.0
    assert "pgconsole_server_planning_seconds_per_second" not in names_of(found, "untracked")  # never a 0
    new = names_of(found, "new")
    assert "pgconsole_server_up" in new and "pgconsole_server_calls_per_second" not in new  # no rate, no snapshot
    assert found[("pgconsole_server_up", (("organization", "acme"), ("server", "new"), ("tags", "")))] == 0.0
    assert found[("pgconsole_scrape_servers", ())] == 3.0
    assert not any(name.startswith(("pgconsole_queue_", "pgconsole_history_")) for name, _ in found)


def test_running_totals_are_counters_from_when_the_counting_began_and_tags_one_bounded_label():
    since = NOW - timedelta(days=2)
    totals = {1: RunningTotals(since=since, calls=40, exec_s=1.5, plan_s=None, deallocations=None)}
    tags = [f"t{i:03}" for i in range(100)]
    found = written(FleetCollector([row(1, "db", tags=tags)], {}, {}, {}, NOW, totals=totals))
    (labels,) = {labels for name, labels in found if name == "pgconsole_server_calls_total"}
    assert dict(labels)["tags"] == ",".join(sorted(tags))[:TAGS_MAX] and len(dict(labels)["tags"]) == TAGS_MAX
    assert found[("pgconsole_server_calls_total", labels)] == 40.0
    assert found[("pgconsole_server_calls_created", labels)] == since.timestamp()
    assert "pgconsole_server_planning_seconds_total" not in names_of(found, "db")  # never tracked: absent
    assert "pgconsole_server_deallocations_total" not in names_of(found, "db")


def test_the_consoles_health_when_given_and_a_broker_that_did_not_answer_said():
    health = {"history_bytes": 10**9, "queues": None, "behind": 2, "dispatched_at": None, "failing": {"email": 1}}
    found = written(FleetCollector([], {}, {}, {}, NOW, health=health))
    assert found[("pgconsole_broker_up", ())] == 0.0
    assert found[("pgconsole_collections_behind", ())] == 2.0
    assert found[("pgconsole_deliveries_failing", (("kind", "email"),))] == 1.0
    assert not any(name.startswith("pgconsole_queue_") for name, _ in found)
    assert not any(name.startswith("pgconsole_collections_dispatched") for name, _ in found)


def test_top_statements_are_labelled_by_queryid_database_and_user_never_their_text():
    statement = SimpleNamespace(
        queryid=-42, database="app", user="web", calls=600, exec_ms=3000.0, plan_ms=None, query="SELECT secret"
    )
    idle = SimpleNamespace(queryid=7, database="app", user="web", calls=0, exec_ms=0.0, plan_ms=None)
    found = written(StatementFamilies([row(1, "db")], {1: [statement, idle]}, left_out=3))
    labels = (
        ("database", "app"),
        ("organization", "acme"),
        ("queryid", "-42"),
        ("server", "db"),
        ("tags", ""),
        ("user", "web"),
    )
    assert found[("pgconsole_statement_calls_per_second", labels)] == 2.0
    assert found[("pgconsole_statement_mean_execution_seconds", labels)] == 0.005
    assert not any(
        name == "pgconsole_statement_mean_execution_seconds" and ("queryid", "7") in lb for name, lb in found
    )
    assert not any(name.startswith("pgconsole_statement_planning") for name, _ in found)  # not tracked
    assert found[("pgconsole_scrape_statement_servers_left_out", ())] == 3.0
    assert "secret" not in str(found)
