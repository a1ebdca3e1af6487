"""The same hours on many earlier days, at once: each statement's calls and time in a list of whole-hour
windows, from the hourly tier in one query. What a baseline reads ("this hour on each of the last seven days"):
statements_in reads one window per call, raw edges included, about five queries each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import sql

from history.public import TABLES
from readtier import db
from readtier.windows import Window, hourly_terms

MAX_STATEMENTS = 1000
MAX_WINDOWS = 100


@dataclass(frozen=True)
class CallsTime:
    """A statement's calls and time (execution and planning) over one window."""

    calls: int
    time_ms: float

    @property
    def mean_ms(self) -> float | None:
        return self.time_ms / self.calls if self.calls else None


def hourly_sums(
    *, server_id: int, windows: Sequence[Window], statement_ids: Sequence[int]
) -> list[dict[int, CallsTime]]:
    """Per window (in the order given), statement id -> its calls and time there, for the statements of
    `statement_ids` that ran in it. Whole hours only (WindowError otherwise), read from the hourly tier alone:
    an hour not rolled up yet (the hour in progress, a rollup behind) or past the hourly retention counts as
    one where nothing ran, so a baseline made of past days never mixes resolutions."""
    ids = sorted(set(statement_ids))
    if len(ids) > MAX_STATEMENTS or len(windows) > MAX_WINDOWS:
        raise ValueError(f"at most {MAX_STATEMENTS} statements and {MAX_WINDOWS} windows at a time")
    out: list[dict[int, CallsTime]] = [{} for _ in windows]
    terms = [(i, t) for i, w in enumerate(windows) for t in hourly_terms(w)]
    if not ids or not terms:
        return out
    table = sql.Identifier(TABLES.STATEMENT_HOURLY.name)
    # Each term's boundary resolved as windows.resolve does (the latest one with rows in its day: rows are dense
    # within a day), then the statements' running sums there, signed and added up per window.
    query = sql.SQL(
        "SELECT b.i, h.statement_id, sum(b.sign * coalesce(h.calls, 0))::int8, "
        "sum(b.sign * (coalesce(h.exec_us, 0) + coalesce(h.plan_us, 0)))::int8 "
        "FROM unnest(%s::int4[], %s::timestamptz[], %s::timestamptz[], %s::int4[]) AS b(i, since, until, sign) "
        "CROSS JOIN LATERAL (SELECT max(until) AS at FROM {table} "
        "  WHERE server_id = %s AND until > b.since AND until <= b.until) r "
        "JOIN {table} h ON h.server_id = %s AND h.until = r.at AND h.statement_id = ANY(%s) "
        "GROUP BY b.i, h.statement_id"
    ).format(table=table)
    params = [
        [i for i, _ in terms],
        [t.since for _, t in terms],
        [t.until for _, t in terms],
        [t.sign for _, t in terms],
        server_id,
        server_id,
        ids,
    ]
    for i, statement_id, calls, time_us in db.fetchall(query, params):
        if calls or time_us:
            out[i][statement_id] = CallsTime(calls=calls, time_ms=time_us / 1000.0)
    return out
