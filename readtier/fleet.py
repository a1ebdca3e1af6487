"""Every server of a fleet at a glance: status, totals over a window and a trend line, in two queries
whatever the number of servers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from history.public import TABLES, TOTAL_NAMES, ServerState
from inventory.models import Server
from readtier import db, windows
from readtier.parts import BUCKET_FIGURES, PlanningState, ServerTotals, bucket_sums, bucket_totals
from readtier.windows import Window

STALE_AFTER_INTERVALS = 3  # no snapshot for this many intervals (plus a minute): stale
# A server's hours (rows of BUCKET_FIGURES) added up as ServerTotals.add does: entries_max, the latest
# hour that knew it.
_SERVER_FIGURES = bucket_sums("(array_agg(entries_max ORDER BY bucket DESC) FILTER (WHERE entries_max IS NOT NULL))[1]")


@dataclass(frozen=True)
class FleetRow:
    server_id: int
    name: str
    organization: str
    tags: list[str]
    status: str  # ok | failing | stale | disabled | never collected
    error_class: str
    error_message: str
    server_version_num: int | None
    extension_version: str
    last_snapshot_at: datetime | None
    snapshots: int
    span_s: float
    calls_per_s: float | None
    exec_ms_per_s: float | None
    plan_ms_per_s: float | None  # None: planning not tracked in the window
    planning: PlanningState
    dealloc_per_s: float | None  # None: unknown (before 14, or no data)
    entries_peak: int | None
    entries_max: int | None
    trend_calls_per_s: list[float | None]  # one per UTC hour of the window; None: no data that hour
    # The last collection's time from its start to its snapshot stored, when it succeeded (None: the last attempt
    # failed, is running, or none yet).
    last_collection_s: float | None = None


def server_status(server: Server, now: datetime) -> str:
    if not server.enabled:
        return "disabled"
    if server.last_attempt_at is None and server.last_success_at is None:
        return "never collected"
    if server.consecutive_failures:
        return "failing"
    limit = timedelta(seconds=STALE_AFTER_INTERVALS * server.interval_s + 60)
    if server.last_success_at is None or now - server.last_success_at > limit:
        return "stale"
    return "ok"


def _collection_s(server: Server) -> float | None:
    """The last attempt's duration when it succeeded: the collection sets last_attempt_at as it starts and
    last_success_at in the snapshot's transaction."""
    start, stored = server.last_attempt_at, server.last_success_at
    if start is None or stored is None or stored < start:
        return None
    return (stored - start).total_seconds()


def fleet_summary(*, server_ids: list[int], window: Window, now: datetime | None = None) -> list[FleetRow]:
    """Per server, in the order given: status, totals over the window and an hourly trend of calls/s.
    Hourly buckets inside the window (the hour in progress as far as it is rolled up), the rest
    (edges, and snapshots not rolled up yet) from the raw snapshots; where raw data has expired an
    edge hour is left out."""
    now = now or timezone.now()
    servers = {s.pk: s for s in Server.objects.filter(pk__in=server_ids).select_related("organization")}
    ids = [sid for sid in server_ids if sid in servers]
    if not ids:
        return []
    lo = windows.ceil_hour(window.start)
    rows = db.fetchall(
        f"""
        WITH h AS MATERIALIZED (
            SELECT server_id, bucket, snapshots, span_s, planning_tracked_s, {", ".join(TOTAL_NAMES)},
                   dealloc_delta, dealloc_span_s, entries_peak, entries_max, wait_session_s, built_until
            FROM {TABLES.SERVER_HOURLY.name} WHERE server_id = ANY(%(ids)s) AND bucket >= %(lo)s AND bucket < %(end)s
            AND least(bucket + interval '1 hour', built_until) <= %(end)s
        ), upto AS (
            -- Per server, where its buckets stop: from there on (and before the first whole hour),
            -- the raw snapshots. Hours in between without a bucket had no snapshot.
            SELECT i.sid AS server_id, greatest(%(lo)s, coalesce(max(least(h.bucket + interval '1 hour',
                   h.built_until)), %(lo)s)) AS since
            FROM unnest(%(ids)s::int8[]) AS i(sid) LEFT JOIN h ON h.server_id = i.sid GROUP BY i.sid
        ), r AS (
            SELECT s.server_id, date_trunc('hour', taken_at) AS bucket, 1 AS snapshots, interval_s AS span_s,
                   CASE WHEN track_planning THEN interval_s ELSE 0 END AS planning_tracked_s,
                   {", ".join(f"coalesce({c}, 0) AS {c}" for c in TOTAL_NAMES)}, dealloc_delta,
                   CASE WHEN dealloc_delta IS NOT NULL THEN interval_s ELSE 0 END AS dealloc_span_s,
                   entries AS entries_peak, entries_max, 0::float8 AS wait_session_s, NULL::timestamptz
            FROM {TABLES.SNAPSHOT.name} s WHERE s.server_id = ANY(%(ids)s) AND kind = 'delta'
            AND taken_at >= %(start)s AND taken_at < least(%(lo)s, %(end)s)
            UNION ALL
            SELECT s.server_id, date_trunc('hour', taken_at), 1, interval_s,
                   CASE WHEN track_planning THEN interval_s ELSE 0 END,
                   {", ".join(f"coalesce({c}, 0)" for c in TOTAL_NAMES)}, dealloc_delta,
                   CASE WHEN dealloc_delta IS NOT NULL THEN interval_s ELSE 0 END,
                   entries, entries_max, 0::float8, NULL::timestamptz
            -- Lateral: an index range per server from its own `since`, never a scan of the whole window.
            FROM upto u CROSS JOIN LATERAL (SELECT * FROM {TABLES.SNAPSHOT.name} s WHERE s.server_id = u.server_id
                AND s.taken_at >= u.since AND s.taken_at >= %(lo)s AND s.taken_at < %(end)s AND kind = 'delta'
                OFFSET 0) s  -- OFFSET 0: kept a subquery, or the planner flattens it into a hash join
        ), b (server_id, bucket, n, snapshots, span_s, planning_tracked_s, {", ".join(TOTAL_NAMES)}, dealloc_delta,
              dealloc_span_s, entries_peak, entries_max, wait_session_s) AS (
            SELECT server_id, bucket, {BUCKET_FIGURES} FROM (SELECT * FROM h UNION ALL SELECT * FROM r) parts
            GROUP BY server_id, bucket
        )
        -- Per server, its hours added up (_SERVER_FIGURES) and their calls and seconds for the trend:
        -- 200 rows for 200 servers, not one per hour.
        SELECT server_id, {_SERVER_FIGURES}, array_agg(bucket ORDER BY bucket), array_agg(calls ORDER BY bucket),
               array_agg(span_s ORDER BY bucket)
        FROM b GROUP BY server_id
        """,
        {"ids": ids, "lo": lo, "start": window.start, "end": window.end},
        binary=True,
    )
    totals: dict[int, ServerTotals] = {}
    rates: dict[int, dict[datetime, float | None]] = {}
    for server_id, *figures, buckets, calls, spans in rows:
        totals[server_id] = bucket_totals(figures)
        # calls/s of each hour, as ServerTotals.per_s("calls") has it
        rates[server_id] = {b: c / span if span else None for b, c, span in zip(buckets, calls, spans, strict=True)}
    hours = []
    at = windows.floor_hour(window.start)
    while at < window.end:
        hours.append(at)
        at += windows.HOUR
    out = []
    for sid in ids:
        s = servers[sid]
        total, rate = totals.get(sid) or ServerTotals(), rates.get(sid, {})
        span = total.span_s
        out.append(
            FleetRow(
                server_id=sid,
                name=s.name,
                organization=s.organization.name,
                tags=list(s.tags or []),
                status=server_status(s, now),
                error_class=s.last_error_class,
                error_message=s.last_error_message,
                server_version_num=s.server_version_num,
                extension_version=s.extension_version,
                last_snapshot_at=s.last_success_at,
                snapshots=total.snapshots,
                span_s=span,
                calls_per_s=total.per_s("calls"),
                exec_ms_per_s=total.per_s("exec_us", 1 / 1000),
                plan_ms_per_s=total.plan_ms_per_s,
                planning=total.planning,
                dealloc_per_s=total.dealloc_per_s,
                entries_peak=total.entries_peak,
                entries_max=total.entries_max,
                trend_calls_per_s=[rate.get(h) for h in hours],
                last_collection_s=_collection_s(s),
            )
        )
    return out


def fleet_waits(*, server_ids: list[int], window: Window) -> dict[int, dict[str, float]]:
    """Per server, the session-seconds sampled in each wait event type over a short window, from the raw samples
    (the last minutes of /metrics; "CPU" for the samples without a wait event). Divided by the server's span over
    the same window (FleetRow.span_s), they are its average active sessions by type."""
    out: dict[int, dict[str, float]] = {}
    for server_id, event_type, session_s in db.fetchall(
        f"SELECT server_id, coalesce(event_type, 'CPU'), sum(session_s) FROM {TABLES.WAIT_EVENT.name} "
        "WHERE server_id = ANY(%(ids)s) AND taken_at >= %(start)s AND taken_at < %(end)s GROUP BY 1, 2",
        {"ids": list(server_ids), "start": window.start, "end": window.end},
    ):
        out.setdefault(server_id, {})[event_type] = float(session_s or 0.0)
    return out


@dataclass(frozen=True)
class RunningTotals:
    """A server's totals since `since` (its first snapshot in this history): they only grow, baselines adding
    nothing, so that a scraper's rate() over them is the server's spend. None: never read (planning while
    track_planning was off, deallocations before PostgreSQL 14)."""

    since: datetime
    calls: int
    exec_s: float
    plan_s: float | None
    deallocations: int | None


def running_totals(*, server_ids: list[int]) -> dict[int, RunningTotals]:
    """Per server with a snapshot, its running totals (ServerState's, kept by every collection)."""
    rows = ServerState.objects.filter(server_id__in=server_ids, counted_since__isnull=False).values_list(
        "server_id", "counted_since", "calls_total", "exec_us_total", "plan_us_total", "dealloc_total"
    )
    return {
        sid: RunningTotals(since, calls or 0, (exec_us or 0) / 1e6, None if plan_us is None else plan_us / 1e6, dealloc)
        for sid, since, calls, exec_us, plan_us, dealloc in rows
    }


def collections_behind(*, now: datetime | None = None) -> int:
    """Enabled servers whose next collection is overdue by more than their interval: the collection workers are
    behind (or stopped)."""
    now = now or timezone.now()
    due = Server.objects.filter(enabled=True, next_collect_at__lt=now).values_list("next_collect_at", "interval_s")
    return sum(1 for at, interval_s in due if now - at > timedelta(seconds=interval_s))


def history_store_bytes() -> int:
    """The history store's database size."""
    return int(db.fetchall("SELECT pg_database_size(current_database())")[0][0])
