"""The families of a /metrics answer (console/views/metrics.py), written by prometheus_client from figures read
once: per server its gauges over the window and its running totals as counters, labelled by organization, server
and tags; the console's own health for operators; each server's top statements on request. A figure the server
does not give is an absent series, never 0."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from console.views.advisor import SEVERITIES
from readtier import FleetRow

LABELS = ("organization", "server", "tags")
TAGS_MAX = 200  # characters of a server's tags as one label value (sorted, comma-separated)


def _labels(row: FleetRow) -> list[str]:
    return [row.organization, row.name, ",".join(sorted(row.tags))[:TAGS_MAX]]


def _gauge(name: str, documentation: str, unit: str = "", extra: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=[*LABELS, *extra], unit=unit)


def _counter(name: str, documentation: str) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, labels=LABELS)


class FleetCollector:
    """The families of one scrape, from figures read once (prometheus_client calls collect() to write them)."""

    def __init__(self, rows, recommendations, alerts, waits, now, health: dict | None = None, totals=None):
        self.rows, self.recommendations, self.alerts, self.waits = rows, recommendations, alerts, waits
        self.now, self.health, self.totals = now, health, totals or {}

    def counters(self):
        """The running totals as counters (rate() over them is the spend; _created: when the counting began)."""
        calls = _counter("pgconsole_server_calls", "Statement calls counted since the server's first snapshot")
        execution = _counter("pgconsole_server_execution_seconds", "Seconds of statement execution counted")
        planning = _counter(
            "pgconsole_server_planning_seconds",
            "Seconds of planning counted while track_planning was on (absent: never tracked)",
        )
        dealloc = _counter(
            "pgconsole_server_deallocations", "pg_stat_statements entries deallocated (absent before PostgreSQL 14)"
        )
        for row in self.rows:
            total = self.totals.get(row.server_id)
            if total is None:
                continue
            labels, created = _labels(row), total.since.timestamp()
            calls.add_metric(labels, float(total.calls), created=created)
            execution.add_metric(labels, total.exec_s, created=created)
            if total.plan_s is not None:
                planning.add_metric(labels, total.plan_s, created=created)
            if total.deallocations is not None:
                dealloc.add_metric(labels, float(total.deallocations), created=created)
        yield from (calls, execution, planning, dealloc)

    def collect(self):
        up = _gauge("pgconsole_server_up", "1 when the server's last collection succeeded and is recent, else 0")
        age = _gauge("pgconsole_server_last_snapshot_age", "Seconds since the server's last snapshot", "seconds")
        duration = _gauge(
            "pgconsole_server_collection_duration",
            "The last collection's time, from its start to its snapshot stored (absent: the last attempt failed)",
            "seconds",
        )
        calls = _gauge("pgconsole_server_calls_per_second", "Statement calls per second over the window")
        execution = _gauge("pgconsole_server_execution_seconds_per_second", "Seconds of statement execution per second")
        planning = _gauge(
            "pgconsole_server_planning_seconds_per_second",
            "Seconds of planning per second (absent where pg_stat_statements.track_planning is off)",
        )
        dealloc = _gauge(
            "pgconsole_server_deallocations_per_second",
            "pg_stat_statements entries deallocated per second (absent before PostgreSQL 14)",
        )
        entries = _gauge("pgconsole_server_statements", "pg_stat_statements entries (the window's peak)")
        entries_max = _gauge("pgconsole_server_statements_max", "pg_stat_statements.max")
        waits = _gauge(
            "pgconsole_server_wait_active_sessions",
            "Average active sessions by wait event type over the window (CPU: active without a wait event)",
            extra=("wait_event_type",),
        )
        alerts = _gauge("pgconsole_server_open_alerts", "Open alerts by severity", extra=("severity",))
        recommendations = _gauge(
            "pgconsole_server_open_recommendations", "Open or acknowledged recommendations", extra=("severity",)
        )
        for row in self.rows:
            labels = _labels(row)
            up.add_metric(labels, 1.0 if row.status == "ok" else 0.0)
            if row.last_snapshot_at is not None:
                age.add_metric(labels, (self.now - row.last_snapshot_at).total_seconds())
            if row.last_collection_s is not None:
                duration.add_metric(labels, row.last_collection_s)
            if row.span_s:
                for family, value in (
                    (calls, row.calls_per_s),
                    (execution, None if row.exec_ms_per_s is None else row.exec_ms_per_s / 1000),
                    (planning, None if row.plan_ms_per_s is None else row.plan_ms_per_s / 1000),
                    (dealloc, row.dealloc_per_s),
                    (entries, row.entries_peak),
                    (entries_max, row.entries_max),
                ):
                    if value is not None:
                        family.add_metric(labels, float(value))
                for event_type, session_s in sorted(self.waits.get(row.server_id, {}).items()):
                    waits.add_metric([*labels, event_type], session_s / row.span_s)
            counts = self.recommendations.get(row.server_id)
            for severity in SEVERITIES:
                alerts.add_metric([*labels, severity], float(self.alerts.get(row.server_id, {}).get(severity, 0)))
                if counts is not None:
                    recommendations.add_metric([*labels, severity], float(getattr(counts, severity)))
        yield from (up, age, duration, calls, execution, planning, dealloc, entries, entries_max, waits, alerts)
        yield recommendations
        yield from self.counters()
        servers = GaugeMetricFamily("pgconsole_scrape_servers", "Servers in this scrape (the token's scope)")
        servers.add_metric([], float(len(self.rows)))
        yield servers
        if self.health is not None:
            yield from _health_families(self.health)


def _health_families(health: dict):
    """The console's own figures (operators' tokens only)."""
    size = GaugeMetricFamily("pgconsole_history_store_size", "The history store's database size", unit="bytes")
    size.add_metric([], float(health["history_bytes"]))
    waiting = GaugeMetricFamily("pgconsole_queue_waiting_tasks", "Tasks waiting in each queue", labels=["queue"])
    oldest = GaugeMetricFamily(
        "pgconsole_queue_oldest_task_age",
        "Seconds the oldest task waiting in each queue has waited (absent: none waits)",
        labels=["queue"],
        unit="seconds",
    )
    broker = GaugeMetricFamily("pgconsole_broker_up", "1 when the broker (Redis) answered this scrape, else 0")
    broker.add_metric([], 0.0 if health["queues"] is None else 1.0)
    for queue in health["queues"] or []:
        waiting.add_metric([queue.name], float(queue.waiting))
        if queue.oldest_age_s is not None:
            oldest.add_metric([queue.name], queue.oldest_age_s)
    behind = GaugeMetricFamily(
        "pgconsole_collections_behind", "Enabled servers whose collection is overdue by more than their interval"
    )
    behind.add_metric([], float(health["behind"]))
    dispatched = GaugeMetricFamily(
        "pgconsole_collections_dispatched_timestamp",
        "When beat last had the due collections dispatched (Unix time; absent: not since the cache was emptied)",
        unit="seconds",
    )
    if health["dispatched_at"] is not None:
        dispatched.add_metric([], float(health["dispatched_at"]))
    failing = GaugeMetricFamily(
        "pgconsole_deliveries_failing",
        "Alert deliveries waiting for a retry after a failed attempt, or given up in the last day, by channel kind",
        labels=["kind"],
    )
    for kind, n in sorted(health["failing"].items()):
        failing.add_metric([kind], float(n))
    yield from (size, broker, waiting, oldest, behind, dispatched, failing)


class StatementFamilies:
    """Per statement, on request (?statements=N): each server's top N statements by total time over the window
    (the top statements page's selector, the console's own left out), for at most STATEMENTS_MAX_SERVERS servers
    of the scrape, the rest said (pgconsole_scrape_statement_servers_left_out). Labelled by queryid, database and
    user, never the text: the series stay as many as N a server."""

    def __init__(self, rows: list[FleetRow], top: dict[int, list], left_out: int):
        self.rows, self.top, self.left_out = rows, top, left_out

    def collect(self):
        extra = ("queryid", "database", "user")
        calls = _gauge("pgconsole_statement_calls_per_second", "A top statement's calls per second", extra=extra)
        execution = _gauge(
            "pgconsole_statement_execution_seconds_per_second",
            "A top statement's seconds of execution per second",
            extra=extra,
        )
        planning = _gauge(
            "pgconsole_statement_planning_seconds_per_second",
            "A top statement's seconds of planning per second (absent where planning is not tracked)",
            extra=extra,
        )
        mean = _gauge(
            "pgconsole_statement_mean_execution", "A top statement's mean execution time", "seconds", extra=extra
        )
        for row in self.rows:
            for st in self.top.get(row.server_id, []):
                labels = [*_labels(row), str(st.queryid), st.database, st.user]
                calls.add_metric(labels, st.calls / row.span_s)
                execution.add_metric(labels, st.exec_ms / 1000 / row.span_s)
                if st.plan_ms is not None:
                    planning.add_metric(labels, st.plan_ms / 1000 / row.span_s)
                if st.calls:
                    mean.add_metric(labels, st.exec_ms / 1000 / st.calls)
        left = GaugeMetricFamily(
            "pgconsole_scrape_statement_servers_left_out",
            "Servers of this scrape whose statements were left out (over METRICS_STATEMENTS_MAX_SERVERS)",
        )
        left.add_metric([], float(self.left_out))
        yield from (calls, execution, planning, mean, left)
