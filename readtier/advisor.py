"""What the advisor reads besides the totals, series and wait events every page reads: how the
statement keys churned between snapshots, when the statistics were reset, the mean query text length
and whether the monitoring role sees every statement."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from history.public import TABLES
from readtier import db
from readtier.windows import Window


@dataclass(frozen=True)
class ServerFacts:
    window: Window
    snapshots: int  # delta snapshots taken in the window (raw snapshots only: within their retention)
    read_from: datetime | None  # the oldest snapshot read (raw snapshots expire first)
    gone_entries: int  # keys seen at one snapshot and gone at the next (evicted, reset or deallocated)
    entries_peak: int | None  # the largest entry count a snapshot read
    stats_resets: list[datetime]  # pg_stat_statements_info.stats_reset values first read in the window (14+)
    full_resets: int  # snapshots that saw every counter start again (reset, or restart with save = off)
    mean_text_bytes: float | None  # mean length of the stored query texts (None: none stored)
    reads_all_stats: bool | None  # the monitoring role sees other roles' statements (None: not checked yet)


def server_facts(*, server_id: int, window: Window) -> ServerFacts:
    """Key churn and resets from the raw snapshots in the window, plus two server-level facts (one query)."""
    snapshot = TABLES.SNAPSHOT.name
    row = db.fetchone(
        f"""
        WITH s AS (
            SELECT taken_at, kind, gone_entries, entries, full_reset, stats_reset_at,
                   lag(stats_reset_at) OVER (ORDER BY taken_at) AS prev_reset
            FROM {snapshot} WHERE server_id = %(s)s AND taken_at < %(end)s AND taken_at >= coalesce(
                (SELECT max(taken_at) FROM {snapshot} WHERE server_id = %(s)s AND taken_at < %(start)s), %(start)s)
        )
        SELECT count(*) FILTER (WHERE kind = 'delta' AND taken_at >= %(start)s),
               min(taken_at) FILTER (WHERE taken_at >= %(start)s),
               coalesce(sum(gone_entries) FILTER (WHERE kind = 'delta' AND taken_at >= %(start)s), 0),
               max(entries) FILTER (WHERE taken_at >= %(start)s),
               coalesce(array_agg(DISTINCT stats_reset_at) FILTER (WHERE taken_at >= %(start)s
                   AND stats_reset_at IS NOT NULL AND stats_reset_at >= %(start)s
                   AND stats_reset_at IS DISTINCT FROM prev_reset), '{{}}'),
               count(*) FILTER (WHERE full_reset AND taken_at >= %(start)s),
               (SELECT avg(octet_length(query)) FROM {TABLES.STATEMENT.name} WHERE server_id = %(s)s
                   AND query IS NOT NULL),
               (SELECT reads_all_stats FROM {TABLES.SERVER_STATE.name} WHERE server_id = %(s)s)
        FROM s
        """,
        {"s": server_id, "start": window.start, "end": window.end},
    )
    snapshots, read_from, gone, peak, resets, full_resets, mean_text, reads_all = row
    return ServerFacts(
        window=window,
        snapshots=snapshots,
        read_from=read_from,
        gone_entries=int(gone),
        entries_peak=peak,
        stats_resets=sorted(resets),
        full_resets=full_resets,
        mean_text_bytes=float(mean_text) if mean_text is not None else None,
        reads_all_stats=reads_all,
    )
