"""Wait events from a monitored server: pg_wait_sampling's cumulative profile when installed,
otherwise a few samples of pg_stat_activity per snapshot.

Both end up as rows of (event_type, event, query_id, samples, session_s), where session_s is
the estimated session-seconds spent in that state during the interval, so that
sum(session_s) / window seconds is the average number of active sessions, whatever the source.
A NULL event of an active backend is time on CPU (or not instrumented) and is kept as such.
"""

import time
from dataclasses import dataclass

import psycopg
from django.conf import settings
from psycopg import sql

from collectors import unit
from collectors.connection import own_application_names
from collectors.errors import CollectionError, from_query_error
from collectors.settings.instance import ServerMeta
from history.public import IntervalWait

ProfileKey = tuple[int, str | None, str | None, int]  # pid, event_type, event, queryid
EventKey = tuple[str | None, str | None, int | None]  # event_type, event, query_id


@dataclass
class WaitReading:
    source: str  # "pg_wait_sampling" or "pg_stat_activity"
    # pg_wait_sampling: the cumulative profile; pg_stat_activity: counts over n samples
    profile: dict[ProfileKey, int] | None = None
    period_ms: float | None = None
    counts: dict[EventKey, int] | None = None
    n_samples: int = 0


# What the waits reading asks, per server version: pg_wait_sampling's profile where it is installed, else looks at
# pg_stat_activity (active client sessions by wait event, and query id from 14), the console's own sessions
# (collector, sampler, connection check) left out.
# The profile keeps a row per backend, event and query id from the server's start (or its last reset): at most
# COLLECTOR_WAIT_PROFILE_MAX_ROWS are taken, and a larger one is not read (looks at pg_stat_activity instead).
_PROFILE = "SELECT pid, event_type, event, coalesce(queryid, 0), count FROM {schema}.pg_wait_sampling_profile LIMIT %s"
_ACTIVITY = (
    "SELECT wait_event_type, wait_event, {query_id}, count(*) FROM pg_stat_activity "
    "WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
    "AND application_name NOT IN ({own}) GROUP BY 1, 2, 3"
)
SQL = unit.Sql(
    (
        (130000, {"pg_wait_sampling": _PROFILE, "pg_stat_activity": _ACTIVITY.replace("{query_id}", "NULL::int8")}),
        (140000, {"pg_wait_sampling": _PROFILE, "pg_stat_activity": _ACTIVITY.replace("{query_id}", "query_id")}),
    )
)


class ProfileOverCap(CollectionError):
    """pg_wait_sampling's profile holds more rows than COLLECTOR_WAIT_PROFILE_MAX_ROWS: not read."""

    code = "profile_over_cap"

    def __init__(self, max_rows: int, message: str):
        super().__init__(message)
        self.max_rows = max_rows


def read_wait_sampling(conn: psycopg.Connection, meta: ServerMeta) -> WaitReading:
    """The cumulative profile; ProfileOverCap when it holds more than COLLECTOR_WAIT_PROFILE_MAX_ROWS rows (a
    part of it would make wrong deltas: the rows left out one time and read the next would count from zero)."""
    query = sql.SQL(SQL.at(meta.server_version_num)["pg_wait_sampling"]).format(
        schema=sql.Identifier(meta.wait_sampling_schema)
    )
    max_rows = int(settings.COLLECTOR["WAIT_PROFILE_MAX_ROWS"])
    try:
        rows = conn.execute(query, (max_rows + 1,)).fetchmany(max_rows + 1)
    except psycopg.Error as exc:
        raise from_query_error(exc, "reading pg_wait_sampling_profile") from exc
    if len(rows) > max_rows:
        raise ProfileOverCap(
            max_rows,
            f"its profile holds more than {max_rows:,} rows (COLLECTOR_WAIT_PROFILE_MAX_ROWS): one per backend, event "
            "and query since the server's start; pg_wait_sampling.profile_pid = off keeps one per event and query",
        )
    profile = {(pid, et, ev, qid): int(n) for pid, et, ev, qid, n in rows}
    period = float(meta.settings.get("pg_wait_sampling.profile_period") or 10)
    return WaitReading(source="pg_wait_sampling", profile=profile, period_ms=period)


def activity_query(server_version_num: int) -> sql.Composed:
    """One look at pg_stat_activity (SQL's, for this version), with the console's own application names."""
    return sql.SQL(SQL.at(server_version_num)["pg_stat_activity"]).format(
        own=sql.SQL(", ").join(map(sql.Literal, own_application_names()))
    )


def sample_activity(conn: psycopg.Connection, meta: ServerMeta, *, samples: int, span_s: float) -> WaitReading:
    """Count active backends by wait event over `samples` looks spread across about `span_s` (inline, in the
    snapshot: only while no sampler runs, collectors/waits/sampler.py)."""
    query = activity_query(meta.server_version_num)
    counts: dict[EventKey, int] = {}
    pause = span_s / max(samples - 1, 1)
    try:
        for i in range(samples):
            if i:
                time.sleep(pause)
            for et, ev, qid, n in conn.execute(query):
                key = (et, ev, qid)
                counts[key] = counts.get(key, 0) + int(n)
    except psycopg.Error as exc:
        raise from_query_error(exc, "sampling pg_stat_activity") from exc
    return WaitReading(source="pg_stat_activity", counts=counts, n_samples=samples)


def rows_for_interval(
    reading: WaitReading, previous_profile: dict[ProfileKey, int] | None, interval_s: float
) -> list[IntervalWait]:
    """Turn a reading into per-event rows for one interval (profile deltas follow DESIGN.md's rules).

    A profile with no previous one to compare with (pg_wait_sampling installed since, or the previous snapshot
    did not read it) is the profile's baseline: its counts hold time from before the interval, so no rows."""
    if reading.source == "pg_stat_activity":
        n = max(reading.n_samples, 1)
        return [
            IntervalWait(et, ev, qid, c, c / n * interval_s)
            for (et, ev, qid), c in sorted(reading.counts.items(), key=lambda kv: -kv[1])
        ]
    if previous_profile is None:
        return []
    previous = previous_profile
    totals: dict[EventKey, int] = {}
    for key, now in reading.profile.items():
        before = previous.get(key)
        delta = now if before is None or now < before else now - before
        if delta:
            event_key = (key[1], key[2], key[3] or None)
            totals[event_key] = totals.get(event_key, 0) + delta
    period_s = (reading.period_ms or 10) / 1000.0
    return [
        IntervalWait(et, ev, qid, c, c * period_s) for (et, ev, qid), c in sorted(totals.items(), key=lambda kv: -kv[1])
    ]


def encode_profile(profile: dict[ProfileKey, int]) -> list[list]:
    return [[pid, et, ev, qid, n] for (pid, et, ev, qid), n in profile.items()]


def decode_profile(data: list | None) -> dict[ProfileKey, int] | None:
    if data is None:
        return None
    return {(pid, et, ev, qid): n for pid, et, ev, qid, n in data}
