"""Reads and writes of the history store that the collector needs: the previous cumulative state,
the statement dimension, and one snapshot written atomically (facts, waits, state, status)."""
from dataclasses import dataclass, fields
from datetime import datetime

import numpy as np
from django.db import connection
from psycopg import sql

from collectors import binary_copy, codec
from collectors.columns import COUNTER_NAMES, GAUGE_NAMES
from collectors.deltas import Entries
from collectors.waits import WaitRow

STATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("server_id", "i8"),
    ("statement_id", "i8"),
    ("userid", "i8"),
    ("dbid", "i8"),
    ("queryid", "i8"),
    ("toplevel", "i8"),
    ("stats_since_us", "i8"),
    ("minmax_stats_since_us", "i8"),
    *((c, "i8") for c in COUNTER_NAMES),
    *((g, "f8") for g in GAUGE_NAMES),
)
_STATE_LIST = sql.SQL(", ").join(sql.Identifier(name) for name, _ in STATE_COLUMNS)


def _raw_cursor():
    """The psycopg cursor under Django's wrapper (for COPY)."""
    connection.ensure_connection()
    return connection.connection.cursor()


def load_statement_state(server_id: int) -> Entries:
    query = sql.SQL(
        "COPY (SELECT {cols} FROM collectors_statement_state WHERE server_id = {sid}) TO STDOUT (FORMAT binary)"
    ).format(cols=_STATE_LIST, sid=sql.Literal(server_id))
    chunks: list[bytes] = []
    with _raw_cursor() as cur, cur.copy(query) as copy:
        for chunk in copy:
            chunks.append(bytes(chunk))
    rows = binary_copy.parse(b"".join(chunks), STATE_COLUMNS)
    n = len(rows)
    return Entries(
        keys=np.column_stack([rows[k] for k in ("userid", "dbid", "queryid", "toplevel")]).reshape(n, 4),
        counters=np.column_stack([rows[c] for c in COUNTER_NAMES]).reshape(n, len(COUNTER_NAMES)),
        gauges=np.column_stack([rows[g] for g in GAUGE_NAMES]).reshape(n, len(GAUGE_NAMES)),
        stats_since_us=rows["stats_since_us"].copy(),
        minmax_stats_since_us=rows["minmax_stats_since_us"].copy(),
        statement_id=rows["statement_id"].copy(),
    )


def write_statement_state(server_id: int, upsert: Entries, delete_ids: np.ndarray) -> None:
    """Replace the state rows of changed entries and remove those of gone ones."""
    ids = np.concatenate([delete_ids, upsert.statement_id]).astype(np.int64)
    with _raw_cursor() as cur:
        if len(ids):
            cur.execute(
                "DELETE FROM collectors_statement_state WHERE server_id = %s AND statement_id = ANY(%s)",
                (server_id, ids.tolist()),
            )
        if not len(upsert):
            return
        query = sql.SQL("COPY collectors_statement_state ({}) FROM STDIN (FORMAT binary)").format(_STATE_LIST)
        with cur.copy(query) as copy:
            copy.write(state_copy_data(server_id, upsert))


def state_copy_data(server_id: int, entries: Entries) -> bytes:
    """COPY BINARY data of state rows for these entries (their statement ids must be set)."""
    rows = np.empty(len(entries), dtype=binary_copy.native_dtype(STATE_COLUMNS))
    rows["server_id"] = server_id
    rows["statement_id"] = entries.statement_id
    for j, k in enumerate(("userid", "dbid", "queryid", "toplevel")):
        rows[k] = entries.keys[:, j]
    rows["stats_since_us"] = entries.stats_since_us
    rows["minmax_stats_since_us"] = entries.minmax_stats_since_us
    for j, c in enumerate(COUNTER_NAMES):
        rows[c] = entries.counters[:, j]
    for j, g in enumerate(GAUGE_NAMES):
        rows[g] = entries.gauges[:, j]
    return binary_copy.build(rows, STATE_COLUMNS)


def find_statements(server_id: int, keys: np.ndarray) -> dict[tuple[int, int, int, int], int]:
    """Dimension ids of keys already known (seen before, perhaps evicted since)."""
    if not len(keys):
        return {}
    with _raw_cursor() as cur:
        cur.execute(
            "SELECT s.userid, s.dbid, s.queryid, s.toplevel::int, s.id "
            "FROM unnest(%s::int8[], %s::int8[], %s::int8[], %s::bool[]) AS k(u, d, q, t) "
            "JOIN collectors_statement s ON s.server_id = %s AND s.queryid = k.q AND s.userid = k.u "
            "AND s.dbid = k.d AND s.toplevel = k.t",
            (
                keys[:, 0].tolist(),
                keys[:, 1].tolist(),
                keys[:, 2].tolist(),
                (keys[:, 3] != 0).tolist(),
                server_id,
            ),
        )
        return {(u, d, q, t): sid for u, d, q, t, sid in cur.fetchall()}


@dataclass
class NewStatement:
    key: tuple[int, int, int, int]
    database_name: str
    user_name: str
    query: str | None
    truncated: bool


def insert_statements(server_id: int, new: list[NewStatement], first_seen_at: datetime) -> dict:
    if not new:
        return {}
    with _raw_cursor() as cur:
        with cur.copy(
            "COPY collectors_statement (server_id, userid, dbid, queryid, toplevel, database_name, user_name,"
            " query, query_truncated, first_seen_at) FROM STDIN"
        ) as copy:
            for s in new:
                u, d, q, t = s.key
                copy.write_row(
                    (server_id, u, d, q, bool(t), s.database_name, s.user_name, s.query, s.truncated, first_seen_at)
                )
    return find_statements(server_id, np.array([s.key for s in new], dtype=np.int64).reshape(-1, 4))


@dataclass
class SnapshotRow:
    """One stored snapshot: what was read of the server and, for a delta, the block of changed statements."""

    server_id: int
    taken_at: datetime
    prev_taken_at: datetime | None
    interval_s: float | None
    kind: str  # baseline | delta
    server_version_num: int
    extension_version: str
    entries: int
    entries_hidden: int
    entries_max: int | None
    changed: int
    new_entries: int
    gone_entries: int
    dealloc: int | None
    dealloc_delta: int | None
    stats_reset_at: datetime | None
    full_reset: bool
    track: str | None
    track_utility: bool | None
    track_planning: bool | None
    save: bool | None
    sample_rate: float | None
    waits_source: str | None
    waits_samples: int | None
    block: codec.Block | None  # None for a baseline


SNAPSHOT_FIELDS = tuple(f.name for f in fields(SnapshotRow) if f.name != "block") + ("statements",)


def insert_snapshot(row: SnapshotRow) -> None:
    """Insert one snapshot row; its partition must exist (partitions.ensure, before the transaction)."""
    payload = None if row.block is None else codec.encode(row.block)
    values = [getattr(row, f) for f in SNAPSHOT_FIELDS[:-1]] + [payload]
    cols = sql.SQL(", ").join(sql.Identifier(f) for f in SNAPSHOT_FIELDS)
    marks = sql.SQL(", ").join(sql.Placeholder() * len(SNAPSHOT_FIELDS))
    with _raw_cursor() as cur:
        cur.execute(sql.SQL("INSERT INTO collectors_snapshot ({}) VALUES ({})").format(cols, marks), values)


def insert_waits(server_id: int, taken_at: datetime, rows: list[WaitRow]) -> None:
    if not rows:
        return
    with _raw_cursor() as cur, cur.copy(
        "COPY collectors_wait_event (server_id, taken_at, event_type, event, query_id, samples, session_s)"
        " FROM STDIN"
    ) as copy:
        for r in rows:
            copy.write_row((server_id, taken_at, r.event_type, r.event, r.query_id, r.samples, r.session_s))
