"""The read tier's writers: for each UTC hour and day, the server's totals as columns, and each
statement's running sums at the bucket's end.

The statement-major tier holds prefix sums. collectors_statement_hourly has, for every statement
seen so far in a UTC day, at each hour boundary `until` of that day, the sum of its deltas from
the day's start to `until`; collectors_statement_daily the same at day boundaries since the start
of the UTC month. Rows are dense within their period (once a statement has a row at a boundary, it
has one at every later boundary of that period that has rows), so any hour-aligned range inside a
day is C(b) - C(a): two rows per statement, whatever the range's length. A boundary without rows
(no snapshot in that hour) has the value of the latest boundary before it in the same period.

Measured against the alternatives in docs/read-tier.md. Buckets are rebuilt whole and in order
from raw snapshots (hours) or from the hourly tier (days), so rebuilding is idempotent.

One module over 400 lines: the hourly and daily writers share the prefix-sum rules above and the copy to and from
the tier tables; a rebuild and a write must agree to the byte, which one module keeps in view."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from django.db import connection
from psycopg import sql
from psycopg.types.json import Jsonb

from history import binary_copy, codec, partitions, tables
from history.columns import TOTAL_NAMES, TOTALS, totals_of
from history.tables import TABLES
from history.wait_rows import event_label

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
TIER_COLUMNS: tuple[tuple[str, str], ...] = (("statement_id", "i8"), *((c, "i8") for c in TOTAL_NAMES))
_TIER_LIST = sql.SQL(", ").join(sql.Identifier(c) for c, _ in TIER_COLUMNS)
# A figure that is 0 is stored as NULL (no bytes in the row): most statements have no planning time
# (track_planning is off by default), no I/O time (track_io_timing), no temp blocks, no WAL for a
# SELECT, no block read from disk. Readers take NULL as 0.
_TIER_READ = sql.SQL(", ").join(
    [sql.Identifier("statement_id")] + [sql.SQL("coalesce({c}, 0)").format(c=sql.Identifier(c)) for c in TOTAL_NAMES]
)


@dataclass
class Sums:
    """Per-statement sums of the read-tier figures (ids strictly increasing)."""

    statement_id: np.ndarray  # (n,) int64
    values: np.ndarray  # (n, len(TOTAL_NAMES)) int64

    @classmethod
    def empty(cls) -> Sums:
        return cls(np.empty(0, np.int64), np.empty((0, len(TOTAL_NAMES)), np.int64))

    def __len__(self) -> int:
        return int(self.statement_id.shape[0])


def add(*parts: Sums) -> Sums:
    """Sum per statement over several Sums (a statement absent from one counts 0 there)."""
    parts = tuple(p for p in parts if len(p))
    if not parts:
        return Sums.empty()
    if len(parts) == 1:
        return parts[0]
    ids = np.concatenate([p.statement_id for p in parts])
    values = np.concatenate([p.values for p in parts])
    order = np.argsort(ids, kind="stable")
    ids, values = ids[order], values[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    return Sums(ids[starts], np.add.reduceat(values, starts, axis=0))


def from_blocks(blocks: list[codec.Block]) -> Sums:
    return add(*(Sums(b.statement_id, totals_of(b.counters)) for b in blocks))


def from_payloads(payloads: list[bytes]) -> Sums:
    """Per-statement sums of the read-tier figures over stored blocks, decoding only those figures."""
    return add(*(Sums(*codec.decode_sums(p, TOTALS)) for p in payloads))


def day_of(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def month_of(at: datetime) -> datetime:
    return day_of(at).replace(day=1)


def next_month(month: datetime) -> datetime:
    return (month + timedelta(days=32)).replace(day=1)


# -- reading the tier ---------------------------------------------------------------------------


def read_boundary(table: tables.HistoryTable, server_id: int, until: datetime) -> Sums:
    """The running sums stored at one boundary (empty if it has no rows)."""
    query = sql.SQL(
        "COPY (SELECT {cols} FROM {table} WHERE server_id = {sid} AND until = {until} ORDER BY statement_id) "
        "TO STDOUT (FORMAT binary)"
    ).format(cols=_TIER_READ, table=sql.Identifier(table.name), sid=sql.Literal(server_id), until=sql.Literal(until))
    rows = _copy_out(query)
    values = np.column_stack([rows[c] for c in TOTAL_NAMES]).reshape(len(rows), len(TOTAL_NAMES))
    return Sums(rows["statement_id"].astype(np.int64), values.astype(np.int64))


def _copy_out(query: sql.Composable) -> np.ndarray:
    connection.ensure_connection()
    chunks: list[bytes] = []
    with connection.connection.cursor() as cur, cur.copy(query) as copy:
        for chunk in copy:
            chunks.append(bytes(chunk))
    return binary_copy.parse(b"".join(chunks), TIER_COLUMNS)


def _write_boundary(table: tables.HistoryTable, server_id: int, until: datetime, sums: Sums) -> None:
    partitions.ensure(table.name, until)
    connection.ensure_connection()
    with connection.connection.cursor() as cur:
        cur.execute(
            sql.SQL("DELETE FROM {} WHERE server_id = %s AND until = %s").format(sql.Identifier(table.name)),
            (server_id, until),
        )
        if not len(sums):
            return
        rows = np.empty(len(sums), dtype=binary_copy.native_dtype(TIER_COLUMNS))
        rows["statement_id"] = sums.statement_id
        for j, c in enumerate(TOTAL_NAMES):
            rows[c] = sums.values[:, j]
        query = sql.SQL("COPY {} (server_id, until, {}) FROM STDIN (FORMAT binary)").format(
            sql.Identifier(table.name), _TIER_LIST
        )
        with cur.copy(query) as copy:
            copy.write(_build_with_constants(rows, server_id, until))


_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def _build_with_constants(rows: np.ndarray, server_id: int, until: datetime) -> bytes:
    """COPY BINARY rows of (server_id, until, statement_id, figures...) with the first two constant
    (a timestamptz travels as int8 microseconds since 2000-01-01)."""
    cols = [("server_id", "i8"), ("until_us", "i8"), *TIER_COLUMNS]
    out = np.empty(len(rows), dtype=binary_copy.native_dtype(cols))
    out["server_id"] = server_id
    out["until_us"] = (until - _PG_EPOCH) // timedelta(microseconds=1)
    for name, _ in TIER_COLUMNS:
        out[name] = rows[name]
    return binary_copy.build(out, cols, zero_as_null=TOTAL_NAMES)


# -- building hours -----------------------------------------------------------------------------


@dataclass
class HourRaw:
    """The delta snapshots of one server in one hour, as stored."""

    snapshots: int
    span_s: float
    planning_tracked_s: float
    dealloc_delta: int | None
    dealloc_span_s: float
    entries_peak: int
    entries_max: int | None
    changed: int
    new_entries: int
    sums: Sums | None  # per statement, over the hour (None: from `payloads`, decoded when written)
    last_taken_at: datetime | None = None
    payloads: list[bytes] | None = None


class BucketFailed(Exception):
    """An hour could not be built (e.g. an unreadable block); the hours before it were written."""

    def __init__(self, hour: datetime, written: int, cause: Exception):
        super().__init__(f"hour {hour.isoformat()}: {type(cause).__name__}: {cause}")
        self.hour, self.written = hour, written


def _raw_hours(server_id: int, start: datetime, end: datetime) -> dict[datetime, HourRaw]:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT date_trunc('hour', taken_at), taken_at, interval_s, track_planning, dealloc_delta, entries, "
            f"entries_max, changed, new_entries, statements FROM {TABLES.SNAPSHOT.name} "
            "WHERE server_id = %s AND taken_at >= %s AND taken_at < %s AND kind = 'delta' ORDER BY taken_at",
            [server_id, start, end],
        )
        rows = cur.fetchall()
    hours: dict[datetime, HourRaw] = {}
    for hour, taken_at, interval_s, tracked, dd, entries, entries_max, changed, new, payload in rows:
        h = hours.get(hour)
        if h is None:
            h = hours[hour] = HourRaw(0, 0.0, 0.0, None, 0.0, 0, None, 0, 0, None, payloads=[])
        h.snapshots += 1
        h.span_s += interval_s
        h.planning_tracked_s += interval_s if tracked else 0.0
        if dd is not None:
            h.dealloc_delta = (h.dealloc_delta or 0) + dd
            h.dealloc_span_s += interval_s
        h.entries_peak = max(h.entries_peak, entries)
        h.entries_max = entries_max  # rows are in time order: the last setting of the hour
        h.changed += changed
        h.new_entries += new
        h.last_taken_at = taken_at
        if payload is not None:
            h.payloads.append(bytes(payload))
    return hours


def wait_event_sums(
    table: tables.HistoryTable, time_col: str, server_id: int, start: datetime, end: datetime, unit: str
) -> dict[datetime, dict[str, float]]:
    """Per bucket, session-seconds by wait event (all query_ids together): what the server charts need."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT date_trunc('{unit}', {time_col}), event_type, event, sum(session_s) FROM {table.name} "
            f"WHERE server_id = %s AND {time_col} >= %s AND {time_col} < %s GROUP BY 1, 2, 3",
            [server_id, start, end],
        )
        out: dict[datetime, dict[str, float]] = {}
        for bucket, event_type, event, seconds in cur.fetchall():
            out.setdefault(bucket, {})[event_label(event_type, event)] = float(seconds)
        return out


_SERVER_COLUMNS = (
    "server_id",
    "bucket",
    "snapshots",
    "span_s",
    "planning_tracked_s",
    *TOTAL_NAMES,
    "dealloc_delta",
    "dealloc_span_s",
    "entries_peak",
    "entries_max",
    "changed",
    "new_entries",
    "wait_session_s",
    "waits",
    "built_until",
)


def _write_server_bucket(table: tables.HistoryTable, values: dict) -> None:
    partitions.ensure(table.name, values["bucket"])
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in _SERVER_COLUMNS)
    updates = sql.SQL(", ").join(sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in _SERVER_COLUMNS[2:])
    with connection.cursor() as cur:
        cur.execute(
            sql.SQL(
                "INSERT INTO {t} ({cols}, built_at) VALUES ({marks}, now()) "
                "ON CONFLICT (server_id, bucket) DO UPDATE SET {updates}, built_at = now()"
            ).format(
                t=sql.Identifier(table.name),
                cols=cols,
                updates=updates,
                marks=sql.SQL(", ").join(sql.Placeholder() * len(_SERVER_COLUMNS)),
            ),
            [Jsonb(values[c]) if c == "waits" else values[c] for c in _SERVER_COLUMNS],
        )


def _drop_bucket(
    server_table: tables.HistoryTable,
    statement_table: tables.HistoryTable,
    server_id: int,
    bucket: datetime,
    boundary: datetime,
) -> None:
    """A bucket without snapshots: neither its server row nor the statements' sums at its end."""
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {server_table.name} WHERE server_id = %s AND bucket = %s", [server_id, bucket])
        cur.execute(f"DELETE FROM {statement_table.name} WHERE server_id = %s AND until = %s", [server_id, boundary])


def latest_boundary(table: tables.HistoryTable, server_id: int, before: datetime, period_start: datetime):
    """The latest boundary with rows in (period_start, before], or None."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT max(until) FROM {table.name} WHERE server_id = %s AND until > %s AND until <= %s",
            [server_id, period_start, before],
        )
        return cur.fetchone()[0]


def rebuild_hours(server_id: int, from_hour: datetime, until: datetime) -> int:
    """Rebuild the hours of `from_hour`'s UTC day from `from_hour` on, from the raw snapshots taken
    before `until`: the server totals per hour and the statements' running sums at each hour's end.
    `until` may fall inside an hour (now): that hour is rolled up as far as it goes, so that reading
    up to now needs only the few raw snapshots since. Returns the number of hours written. Call
    inside a transaction."""
    end = min(day_of(from_hour) + DAY, until)
    raw = _raw_hours(server_id, from_hour, end)
    return write_hours(server_id, from_hour, end, raw)


def write_hours(server_id: int, from_hour: datetime, end: datetime, hours: dict[datetime, HourRaw]) -> int:
    """Write hours [from_hour, end) of one UTC day from what each hour holds (an hour absent from
    `hours` has no snapshot: its bucket and boundary rows go, the running sums carry over). An hour
    that `end` cuts holds the snapshots up to its last one: its bucket says so in built_until."""
    day = day_of(from_hour)
    waits = wait_event_sums(TABLES.WAIT_EVENT_HOURLY, "bucket", server_id, from_hour, end, "hour")
    start_at = latest_boundary(TABLES.STATEMENT_HOURLY, server_id, from_hour, day)
    running = Sums.empty() if start_at is None else read_boundary(TABLES.STATEMENT_HOURLY, server_id, start_at)
    written = 0
    hour = from_hour
    while hour < end:
        h = hours.get(hour)
        boundary = hour + HOUR
        if h is None:
            # No snapshot in this hour: no bucket (a gap stays a gap); the running sums carry over.
            _drop_bucket(TABLES.SERVER_HOURLY, TABLES.STATEMENT_HOURLY, server_id, hour, boundary)
            hour = boundary
            continue
        try:
            hour_sums = h.sums if h.sums is not None else from_payloads(h.payloads)
        except (codec.CodecError, ValueError, zlib.error) as exc:
            # The running sums of the later hours of this day depend on this one: stop here.
            raise BucketFailed(hour, written, exc) from exc
        running = add(running, hour_sums)
        _write_boundary(TABLES.STATEMENT_HOURLY, server_id, boundary, running)
        server_totals = hour_sums.values.sum(axis=0) if len(hour_sums) else np.zeros(len(TOTAL_NAMES), np.int64)
        _write_server_bucket(
            TABLES.SERVER_HOURLY,
            {
                "server_id": server_id,
                "bucket": hour,
                "snapshots": h.snapshots,
                "span_s": h.span_s,
                "planning_tracked_s": h.planning_tracked_s,
                **{c: int(v) for c, v in zip(TOTAL_NAMES, server_totals, strict=True)},
                "dealloc_delta": h.dealloc_delta,
                "dealloc_span_s": h.dealloc_span_s,
                "entries_peak": h.entries_peak,
                "entries_max": h.entries_max,
                "changed": h.changed,
                "new_entries": h.new_entries,
                "wait_session_s": sum(waits.get(hour, {}).values()),
                "waits": waits.get(hour, {}),
                "built_until": boundary if boundary <= end else h.last_taken_at + timedelta(microseconds=1),
            },
        )
        written += 1
        hour = boundary
    return written


# -- building days ------------------------------------------------------------------------------


def day_totals(server_id: int, day: datetime) -> Sums:
    """Each statement's sums over one UTC day, from the hourly tier (its latest boundary that day)."""
    last = latest_boundary(TABLES.STATEMENT_HOURLY, server_id, day + DAY, day)
    return Sums.empty() if last is None else read_boundary(TABLES.STATEMENT_HOURLY, server_id, last)


def rebuild_days(
    server_id: int, from_day: datetime, until: datetime, older: dict[datetime, tuple[dict, Sums]] | None = None
) -> int:
    """Rebuild the days of `from_day`'s UTC month from `from_day` on (whole days before `until`):
    server totals per day (sums of its hours) and the statements' running sums at each day's end.
    `older` gives days whose hours have expired (the backfill of blob rollups)."""
    end = min(next_month(month_of(from_day)), until)
    n = len(TOTAL_NAMES)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT date_trunc('day', bucket), sum(snapshots), sum(span_s), sum(planning_tracked_s), "
            + ", ".join(f"sum({c})" for c in TOTAL_NAMES)
            + ", sum(dealloc_delta), sum(dealloc_span_s), max(entries_peak), "
            "(array_agg(entries_max ORDER BY bucket DESC))[1], sum(changed), sum(new_entries), sum(wait_session_s), "
            "jsonb_agg(waits) "
            f"FROM {TABLES.SERVER_HOURLY.name} WHERE server_id = %s AND bucket >= %s AND bucket < %s GROUP BY 1",
            [server_id, from_day, end],
        )
        rows = cur.fetchall()
    days = {}
    for day, snapshots, span_s, tracked_s, *rest in rows:
        figures, (dd, dd_span, peak, emax, changed, new, waits, hour_waits) = rest[:n], rest[n:]
        server = {
            "server_id": server_id,
            "bucket": day,
            "snapshots": int(snapshots),
            "span_s": float(span_s),
            "planning_tracked_s": float(tracked_s),
            **{c: int(v) for c, v in zip(TOTAL_NAMES, figures, strict=True)},
            "dealloc_delta": None if dd is None else int(dd),
            "dealloc_span_s": float(dd_span),
            "entries_peak": int(peak),
            "entries_max": emax,
            "changed": int(changed),
            "new_entries": int(new),
            "wait_session_s": float(waits),
            "built_until": day + DAY,
            # jsonb comes back as text through Django's cursor (its JSONField decodes it itself)
            "waits": add_waits([json.loads(w) if isinstance(w, str) else w for w in json_list(hour_waits)]),
        }
        days[day] = (server, day_totals(server_id, day))
    for day, value in (older or {}).items():
        if from_day <= day < end:
            days.setdefault(day, value)
    return write_days(server_id, from_day, end, days)


def json_list(value) -> list:
    return json.loads(value) if isinstance(value, str) else list(value or [])


def add_waits(parts: list[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in parts:
        for label, seconds in part.items():
            out[label] = out.get(label, 0.0) + seconds
    return out


def write_days(server_id: int, from_day: datetime, end: datetime, days: dict[datetime, tuple[dict, Sums]]) -> int:
    """Write days [from_day, end) of one UTC month from each day's server row and statement sums (a day
    absent from `days` has no data: its bucket and boundary rows go, the running sums carry over)."""
    start_at = latest_boundary(TABLES.STATEMENT_DAILY, server_id, from_day, month_of(from_day))
    running = Sums.empty() if start_at is None else read_boundary(TABLES.STATEMENT_DAILY, server_id, start_at)
    written = 0
    day = from_day
    while day < end:
        boundary = day + DAY
        if day not in days:
            _drop_bucket(TABLES.SERVER_DAILY, TABLES.STATEMENT_DAILY, server_id, day, boundary)
            day = boundary
            continue
        server, sums = days[day]
        running = add(running, sums)
        _write_boundary(TABLES.STATEMENT_DAILY, server_id, boundary, running)
        _write_server_bucket(TABLES.SERVER_DAILY, server)
        written += 1
        day = boundary
    return written
