"""Wait events over a window, as average active sessions: of a server, or of one statement's
query_id (PostgreSQL 14+ exposes query_id in pg_stat_activity and pg_wait_sampling)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from history.public import TABLES, event_label
from readtier import db, parts, windows
from readtier.windows import Window


@dataclass(frozen=True)
class WaitEventRow:
    event: str  # "Type:Event", "CPU (no wait event)", or "other"
    event_type: str | None
    session_s: float  # session-seconds spent in it over the window
    active_sessions: float | None  # session_s / seconds covered; None: no data
    share: float | None  # of all session-seconds in the window


@dataclass(frozen=True)
class WaitEvents:
    window: Window
    read_start: datetime
    read_end: datetime
    span_s: float  # seconds covered by snapshots in the window
    statement_id: int | None
    query_id: int | None
    rows: list[WaitEventRow]  # heaviest first; beyond `top`, folded into "other"


def wait_events(*, server_id: int, window: Window, statement_id: int | None = None, top: int = 10) -> WaitEvents:
    query_id = None
    if statement_id is not None:
        found = db.fetchall(
            f"SELECT queryid FROM {TABLES.STATEMENT.name} WHERE id = %s AND server_id = %s", [statement_id, server_id]
        )
        if not found:
            raise LookupError(f"no statement {statement_id} on server {server_id}")
        query_id = found[0][0]
    p = windows.plan(window, windows.coverage(server_id))
    totals = parts.window_totals(server_id, p)
    pieces, params = [], []
    qfilter = "" if query_id is None else " AND query_id = %s"
    for a, b, sign in p.raw:
        pieces.append(
            f"SELECT event_type, event, {sign:d} * session_s AS session_s FROM {TABLES.WAIT_EVENT.name} "
            f"WHERE server_id = %s AND taken_at >= %s AND taken_at < %s{qfilter}"
        )
        params += [server_id, a, b] + ([query_id] if query_id is not None else [])
    if p.core is not None:
        s, e = p.core
        pieces.append(
            f"SELECT event_type, event, session_s FROM {TABLES.WAIT_EVENT_HOURLY.name} "
            f"WHERE server_id = %s AND bucket >= %s AND bucket < %s{qfilter}"
        )
        params += [server_id, s, e] + ([query_id] if query_id is not None else [])
        # Days whose hours have expired: the daily rollup.
        pieces.append(
            f"SELECT event_type, event, session_s FROM {TABLES.WAIT_EVENT_DAILY.name} d "
            f"WHERE server_id = %s AND bucket >= %s AND bucket + interval '1 day' <= %s{qfilter} "
            f"AND bucket + interval '1 day' <= coalesce((SELECT min(bucket) FROM {TABLES.SERVER_HOURLY.name} "
            "WHERE server_id = d.server_id), 'infinity')"
        )
        params += [server_id, s, e] + ([query_id] if query_id is not None else [])
    rows = []
    if pieces:
        rows = db.fetchall(
            "SELECT event_type, event, sum(session_s) FROM (" + " UNION ALL ".join(pieces) + ") w "
            "GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2",
            params,
        )
    grand = sum(r[2] for r in rows)
    span = totals.span_s

    def row(label, et, s):
        return WaitEventRow(label, et, s, s / span if span else None, s / grand if grand else None)

    out = [row(event_label(et, ev), et, s) for et, ev, s in rows[:top]]
    rest = sum(r[2] for r in rows[top:])
    if rows[top:]:
        out.append(row("other", None, rest))
    return WaitEvents(window, p.start, p.end, span, statement_id, query_id, out)
