"""One statement: whose it is (for the API's series and waits); for its page, the dimension row with its
server and organization, when it was last seen running, and the same queryid on the organization's other
servers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from history.public import DAY, HOUR, TABLES, HistoryTable, day_of, decode_sums, month_of, partition_name
from inventory.models import Server
from readtier import db

_CALLS = (("calls", ("calls",)),)  # decode_sums: the calls column of a stored block, nothing else
_SERVER_TABLE = Server._meta.db_table


@dataclass(frozen=True)
class StatementDetail:
    statement_id: int
    server_id: int
    organization_id: int
    queryid: int
    userid: int
    dbid: int
    database: str
    user: str
    toplevel: bool
    query: str | None  # None: see text_status
    query_truncated: bool
    text_status: str  # stored | evicted | not_visible | unavailable | pending (history.models.TextStatus)
    first_seen_at: datetime
    # The end of the latest interval in which its calls grew, as precisely as the history still knows it:
    # the snapshot (raw data kept), else the end of the hour (hourly tier), else the end of the UTC day.
    last_seen_at: datetime | None  # None: no call recorded in the history kept (e.g. only in a baseline)
    last_seen_precision: str | None  # snapshot | hour | day


@dataclass(frozen=True)
class StatementOwner:
    statement_id: int
    server_id: int
    organization_id: int


def _visible(statement_id: int, organization_ids: Iterable[int] | None) -> tuple[str, list]:
    """The statement's row joined to its server, limited to the organizations given (None: any)."""
    where, params = "st.id = %s", [statement_id]
    if organization_ids is not None:
        where += " AND s.organization_id = ANY(%s)"
        params.append(list(organization_ids))
    return f"FROM {TABLES.STATEMENT.name} st JOIN {_SERVER_TABLE} s ON s.id = st.server_id WHERE {where}", params


def statement_owner(*, statement_id: int, organization_ids: Iterable[int] | None = None) -> StatementOwner:
    """Whose the statement is (one indexed query): what a series or a wait list needs before reading, without
    the search for when it last ran that the statement's page shows. LookupError as statement_detail."""
    source, params = _visible(statement_id, organization_ids)
    found = db.fetchall(f"SELECT st.id, st.server_id, s.organization_id {source}", params)
    if not found:
        raise LookupError(f"no statement {statement_id}")
    return StatementOwner(*found[0])


def statement_detail(*, statement_id: int, organization_ids: Iterable[int] | None = None) -> StatementDetail:
    """The statement's dimension row, its server's organization and when it last ran (at most 6 queries).
    LookupError if there is no such statement, or (organization_ids given) its server belongs to none of
    them: nothing more is read for a statement the caller may not see."""
    source, params = _visible(statement_id, organization_ids)
    found = db.fetchall(
        "SELECT st.id, st.server_id, s.organization_id, st.queryid, st.userid, st.dbid, st.database_name, "
        f"st.user_name, st.toplevel, st.query, st.query_truncated, st.text_status, st.first_seen_at {source}",
        params,
    )
    if not found:
        raise LookupError(f"no statement {statement_id}")
    (sid, server_id, org_id, queryid, userid, dbid, database, user, toplevel, query, truncated, status, first_seen) = (
        found[0]
    )
    last_seen, precision = last_seen_at(server_id=server_id, statement_id=sid)
    return StatementDetail(
        statement_id=sid,
        server_id=server_id,
        organization_id=org_id,
        queryid=queryid,
        userid=userid,
        dbid=dbid,
        database=database,
        user=user,
        toplevel=toplevel,
        query=query,
        query_truncated=truncated,
        text_status=status,
        first_seen_at=first_seen,
        last_seen_at=last_seen,
        last_seen_precision=precision,
    )


# -- last seen --------------------------------------------------------------------------------------


def last_seen_at(*, server_id: int, statement_id: int) -> tuple[datetime | None, str | None]:
    """(when, precision) of the end of the latest interval in which the statement's calls grew.

    Searched newest first, with a bounded number of queries whatever the history's length: the raw
    snapshots not rolled up yet; else the running sums at the end of each UTC day (hourly tier) and of
    each month (daily tier) say in which day or month it last ran; the boundaries inside that period say
    which hour or day; the raw snapshots of that hour, where still kept, which snapshot. The tiers hold
    running sums from the start of their period, dense once a statement appears in it, so a period's
    last boundary holds its total, and calls grew at a boundary where the sum is above the one before."""
    tail = _raw_hit(server_id, statement_id, None)  # snapshots not in the hourly tier yet
    if tail is not None:
        return tail, "snapshot"
    hours, days = _boundaries(server_id)
    hour_ends = _period_ends(hours, HOUR, day_of)  # last hour boundary of each UTC day
    day_ends = _period_ends(days, DAY, month_of)  # last day boundary of each month
    calls = _probe(server_id, statement_id, [(TABLES.STATEMENT_HOURLY, hour_ends), (TABLES.STATEMENT_DAILY, day_ends)])
    # The hourly tier holds the latest days; the daily tier only days already in it (or whose hours expired).
    ran_day = next((b for b in reversed(hour_ends) if calls[TABLES.STATEMENT_HOURLY.name].get(b, 0) > 0), None)
    if ran_day is not None:
        period = day_of(ran_day - HOUR)
        inside = [b for b in hours if day_of(b - HOUR) == period]
        hour_end = _last_growth(server_id, statement_id, TABLES.STATEMENT_HOURLY, inside)
        exact = _raw_hit(server_id, statement_id, (hour_end - HOUR, hour_end))
        return (exact, "snapshot") if exact is not None else (hour_end, "hour")
    ran_month = next((b for b in reversed(day_ends) if calls[TABLES.STATEMENT_DAILY.name].get(b, 0) > 0), None)
    if ran_month is not None:
        period = month_of(ran_month - DAY)
        inside = [b for b in days if month_of(b - DAY) == period]
        return _last_growth(server_id, statement_id, TABLES.STATEMENT_DAILY, inside), "day"
    return None, None


def _raw_hit(server_id: int, statement_id: int, hour: tuple[datetime, datetime] | None) -> datetime | None:
    """The latest delta snapshot in `hour` (None: those taken since the hourly tier was last built) whose
    block counts calls of the statement. Only the calls column of each block is decoded."""
    if hour is None:
        where = (
            f"taken_at >= coalesce((SELECT max(built_until) FROM {TABLES.SERVER_HOURLY.name} "
            "WHERE server_id = %s), '-infinity')"
        )
        params = [server_id, server_id]
    else:
        where, params = "taken_at >= %s AND taken_at < %s", [server_id, *hour]
    rows = db.fetchall(
        f"SELECT taken_at, statements FROM {TABLES.SNAPSHOT.name} WHERE server_id = %s AND kind = 'delta' "
        f"AND statements IS NOT NULL AND {where} ORDER BY taken_at DESC",
        params,
        binary=True,
    )
    for taken_at, payload in rows:
        ids, calls = decode_sums(bytes(payload), _CALLS)
        i = int(np.searchsorted(ids, statement_id))
        if i < len(ids) and ids[i] == statement_id and calls[i, 0] > 0:
            return taken_at
    return None


def _boundaries(server_id: int) -> tuple[list[datetime], list[datetime]]:
    """The boundaries with rows in the statement tiers: the end of every hourly and daily server bucket
    (the tiers write a boundary exactly where the server has a bucket). One query, a few hundred rows."""
    rows = db.fetchall(
        f"SELECT 'h', bucket FROM {TABLES.SERVER_HOURLY.name} WHERE server_id = %(s)s "
        f"UNION ALL SELECT 'd', bucket FROM {TABLES.SERVER_DAILY.name} WHERE server_id = %(s)s ORDER BY 2",
        {"s": server_id},
    )
    hours = [b + HOUR for kind, b in rows if kind == "h"]
    days = [b + DAY for kind, b in rows if kind == "d"]
    return hours, days


def _period_ends(boundaries: list[datetime], step: timedelta, period_of) -> list[datetime]:
    """The last boundary of each period (sorted input; a boundary ends the bucket of `step` just before it)."""
    ends: dict[datetime, datetime] = {}
    for b in boundaries:
        ends[period_of(b - step)] = b
    return list(ends.values())


def _probe(
    server_id: int, statement_id: int, wanted: Iterable[tuple[HistoryTable, list[datetime]]]
) -> dict[str, dict[datetime, int]]:
    """table name -> {boundary: the statement's running calls there} (absent: no row, i.e. 0). One query
    of index probes, grouped by the partition that holds each boundary (the planner prunes each group)."""
    pieces, params = [], []
    out: dict[str, dict[datetime, int]] = {}
    for table, untils in wanted:
        out[table.name] = {}
        by_partition: dict[str, list[datetime]] = {}
        for u in sorted(untils):
            by_partition.setdefault(partition_name(table.name, u), []).append(u)
        for group in by_partition.values():
            pieces.append(
                f"SELECT %s::text, until, coalesce(calls, 0) FROM {table.name} WHERE server_id = %s "
                "AND statement_id = %s AND until >= %s AND until <= %s AND until = ANY(%s)"
            )
            params += [table.name, server_id, statement_id, group[0], group[-1], group]
    if pieces:
        for name, until, calls in db.fetchall(" UNION ALL ".join(pieces), params):
            out[name][until] = calls
    return out


def _last_growth(server_id: int, statement_id: int, table: HistoryTable, inside: list[datetime]) -> datetime:
    """The last boundary of one period at which the statement's running calls grew (the period's
    last boundary holds a positive sum, so there is one)."""
    calls = _probe(server_id, statement_id, [(table, inside)])[table.name]
    last, before = inside[-1], 0
    for b in inside:
        now = calls.get(b, 0)
        if now > before:
            last = b
        before = now
    return last


# -- the same queryid elsewhere -----------------------------------------------------------------------


@dataclass(frozen=True)
class SameQueryId:
    """The statement's queryid on another server of the organization (one row per statement key there)."""

    statement_id: int
    server_id: int
    server_name: str
    database: str
    user: str
    toplevel: bool
    first_seen_at: datetime


def same_queryid_elsewhere(*, statement_id: int, organization_id: int, limit: int = 100) -> list[SameQueryId]:
    """The statements with the same queryid on the organization's other servers, by server name (one query)."""
    rows = db.fetchall(
        "SELECT st.id, st.server_id, s.name, st.database_name, st.user_name, st.toplevel, st.first_seen_at "
        f"FROM {TABLES.STATEMENT.name} me JOIN {_SERVER_TABLE} s ON s.organization_id = %s AND s.id <> me.server_id "
        f"JOIN {TABLES.STATEMENT.name} st ON st.server_id = s.id AND st.queryid = me.queryid "
        "WHERE me.id = %s ORDER BY s.name, st.database_name, st.user_name, st.toplevel DESC, st.id LIMIT %s",
        [organization_id, statement_id, limit],
    )
    return [SameQueryId(*r) for r in rows]
