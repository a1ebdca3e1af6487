"""Statements over a window: the top list (one SQL aggregate over the statement-major tier, joined
to the statement dimension, filtered, ordered and paged in SQL), and one window against another.

One module over 400 lines: the top list and the comparison of two windows are the same SQL aggregate (one select
list, one filter, one page), built once here for both."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
from psycopg import sql

from history.public import TABLES, TOTAL_NAMES, Sums, array_param, own_sql
from readtier import db, parts, windows
from readtier.windows import Window

# order -> SQL over the per-statement sums `k` (descending; ties by statement id), and the sums it needs
# besides calls, plans, exec_us, plan_us and rows (which every statement's "did it run" test reads).
ORDERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "total": ("k.exec_us + k.plan_us", ()),
    "exec": ("k.exec_us", ()),
    "plan": ("k.plan_us", ()),
    "calls": ("k.calls", ()),
    "mean": ("k.exec_us::float8 / nullif(k.calls, 0)", ()),  # mean execution time, as pg's mean_exec_time
    "rows": ("k.rows", ()),
    "shared_read": ("k.shared_blks_read", ("shared_blks_read",)),
    "temp": ("k.temp_blks", ("temp_blks",)),
    "io": ("k.io_us", ("io_us",)),
    "wal": ("k.wal_bytes", ("wal_bytes",)),
    # planning's share of the statement's time (NULL, sorted last, where it had no time at all)
    "plan_share": ("k.plan_us::float8 / nullif(k.exec_us + k.plan_us, 0)", ()),
}
_RAN = ("calls", "plans", "exec_us", "plan_us", "rows")
MAX_PAGE_SIZE = 500


@dataclass(frozen=True)
class StatementFilters:
    database: str | None = None  # exact database name
    user: str | None = None  # exact user name
    text: str | None = None  # case-insensitive substring of the normalized text (taken literally)
    toplevel: bool | None = None
    # Only statements with at least this share (0-1) of the server's database time over the window: a ranking
    # by a ratio (plan share) among statements that matter, not led by one run twice for 6 ms.
    min_time_share: float | None = None
    # The console's own statements (its collections: marked, and run as its monitoring role, history.own) left
    # out; a statement whose text is unknown stays.
    hide_own: bool = False
    # Only these statements (ids): read from the history for them alone, not summed for the whole server.
    statement_ids: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Page:
    number: int = 1
    size: int = 50

    def __post_init__(self):
        if self.number < 1:
            raise ValueError(f"page number {self.number}: pages start at 1")
        if not 1 <= self.size <= MAX_PAGE_SIZE:
            raise ValueError(f"page size {self.size}: between 1 and {MAX_PAGE_SIZE}")


@dataclass(frozen=True)
class Planning:
    """Whether planning time was tracked over a window (track_planning, per interval)."""

    tracked_s: float
    span_s: float

    @property
    def state(self) -> parts.PlanningState:
        return parts.planning_state(self.tracked_s, self.span_s)

    @property
    def tracked(self) -> bool:
        return self.tracked_s > 0


@dataclass(frozen=True)
class StatementTotals:
    """One statement's sums over a window. Planning figures are None where planning was not tracked."""

    statement_id: int
    queryid: int
    database: str
    user: str
    toplevel: bool
    query: str | None  # None: no text (see text_status)
    text_status: str  # stored | evicted | not_visible | unavailable | pending
    calls: int
    plans: int | None
    exec_ms: float
    plan_ms: float | None
    rows: int
    shared_blks_hit: int
    shared_blks_read: int
    temp_blks: int
    io_ms: float
    wal_bytes: int
    own: bool = False  # one of the console's own statements (its collections): history.own

    @property
    def total_ms(self) -> float:
        return self.exec_ms + (self.plan_ms or 0.0)

    @property
    def mean_exec_ms(self) -> float | None:
        return self.exec_ms / self.calls if self.calls else None

    @property
    def mean_plan_ms(self) -> float | None:
        return self.plan_ms / self.plans if self.plan_ms is not None and self.plans else None

    @property
    def plan_share(self) -> float | None:
        """Planning's share of the statement's time (None: not tracked, or no time at all)."""
        if self.plan_ms is None or self.total_ms <= 0:
            return None
        return self.plan_ms / self.total_ms

    @property
    def rows_per_call(self) -> float | None:
        return self.rows / self.calls if self.calls else None

    @property
    def hit_ratio(self) -> float | None:
        blocks = self.shared_blks_hit + self.shared_blks_read
        return self.shared_blks_hit / blocks if blocks else None


@dataclass(frozen=True)
class TopStatements:
    window: Window
    read_start: datetime  # the range really read (edges move outward where raw data has expired)
    read_end: datetime
    order: str
    page: Page
    rows: list[StatementTotals]
    total_count: int  # statements in the window that pass the filters
    planning: Planning
    intervals: int  # snapshots whose intervals the window covers
    resolutions: tuple[str, ...]  # raw, hourly, daily: what was read
    db_time_ms: float = 0.0  # the server's time (execution and planning) over the window: what a share is of


def _parts_sql(server_id: int, resolved, raw: Sums, ids: tuple[int, ...] | None = None) -> tuple[sql.Composable, list]:
    """UNION ALL of signed per-statement figures: each tier term at its resolved boundary, and the raw edges
    (of the statements `ids` only, when given)."""
    pieces: list[sql.Composable] = []
    params: list = []
    only = sql.SQL("")
    if ids is not None:
        keep = np.isin(raw.statement_id, np.asarray(ids, np.int64))
        raw = Sums(raw.statement_id[keep], raw.values[keep])
        only = sql.SQL(" AND statement_id = ANY(%s)")
    figures = sql.SQL(", ").join(sql.Identifier(c) for c in TOTAL_NAMES)
    for term, until in resolved:
        if until is None:
            continue
        signed = sql.SQL(", ").join(
            sql.SQL("{s} * {c} AS {c}").format(s=sql.Literal(term.sign), c=sql.Identifier(c)) for c in TOTAL_NAMES
        )
        pieces.append(
            sql.SQL("SELECT statement_id, {} FROM {} WHERE server_id = %s AND until = %s{}").format(
                signed, sql.Identifier(term.table.name), only
            )
        )
        params += [server_id, until] if ids is None else [server_id, until, list(ids)]
    if len(raw):
        arrays = sql.SQL(", ").join(sql.SQL("%b") for _ in range(len(TOTAL_NAMES) + 1))
        pieces.append(sql.SQL("SELECT * FROM unnest({}) AS r(statement_id, {})").format(arrays, figures))
        params.append(array_param(raw.statement_id, "int8"))
        params += [array_param(raw.values[:, j], "int8") for j in range(len(TOTAL_NAMES))]
    if not pieces:
        pieces.append(
            sql.SQL("SELECT NULL::int8 AS statement_id, {} WHERE false").format(
                sql.SQL(", ").join(sql.SQL("0::int8 AS {}").format(sql.Identifier(c)) for c in TOTAL_NAMES)
            )
        )
    return sql.SQL(" UNION ALL ").join(pieces), params


def _filters_sql(
    server_id: int, filters: StatementFilters, min_time_us: float | None = None
) -> tuple[sql.Composable, list]:
    clauses: list[sql.Composable] = []
    params: list = []
    if min_time_us is not None:
        clauses.append(sql.SQL("k.exec_us + k.plan_us >= %s"))
        params.append(min_time_us)
    if filters.database is not None:
        clauses.append(sql.SQL("st.database_name = %s"))
        params.append(filters.database)
    if filters.user is not None:
        clauses.append(sql.SQL("st.user_name = %s"))
        params.append(filters.user)
    if filters.hide_own:
        clauses.append(sql.SQL("NOT ") + own_sql(server_id))
    if filters.toplevel is not None:
        clauses.append(sql.SQL("st.toplevel = %s"))
        params.append(filters.toplevel)
    if filters.text:
        escaped = filters.text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        clauses.append(sql.SQL("st.query ILIKE %s"))
        params.append(f"%{escaped}%")
    return sql.SQL("").join(sql.SQL(" AND ") + c for c in clauses), params


def _sum(column: str, suffix: str, name: str) -> sql.Composable:
    """sum() of a figure that the tiers store as NULL where it is 0 (coalesce: every part was NULL)."""
    return sql.SQL("coalesce(sum(" + column + "), 0)" + suffix).format(c=sql.Identifier(name))


_DIMENSION = "st.id, st.queryid, st.database_name, st.user_name, st.toplevel, st.query, st.text_status"


def _dimension(server_id: int) -> sql.Composable:
    """The statement's columns, and whether it is one of the console's own (history.own)."""
    return sql.SQL(_DIMENSION + ", ") + own_sql(server_id)


def _aggregate(
    server_id: int,
    p: windows.ReadPlan,
    raw: Sums,
    *,
    filters: StatementFilters,
    order: str,
    limit: int | None,
    offset: int = 0,
    min_time_us: float | None = None,
) -> list[tuple]:
    """Rows of (dimension..., figures..., total count), ordered, filtered and paged in SQL.

    A page is read in two steps over the same parts: the order key (and whether the statement ran at
    all) for every statement, filtered through the dimension, ordered and paged; then every figure for
    that page only (summing ten figures for thousands of statements to show fifty costs twice as
    much). Every statement (limit None) is summed once, then joined to the dimension. The tiers store
    a figure of 0 as NULL: sum() skips it, coalesce() gives 0 where every part was NULL."""
    resolved = windows.resolve(server_id, p.terms)
    union, params = _parts_sql(server_id, resolved, raw, filters.statement_ids)
    where, fparams = _filters_sql(server_id, filters, min_time_us)
    key, extra = ORDERS[order]
    if limit is None:  # every statement: sum everything once, then join the texts
        sums = sql.SQL(", ").join(_sum("{c}", "::int8 AS {c}", c) for c in TOTAL_NAMES)
        figures = sql.SQL(", ").join(sql.SQL("k.{}").format(sql.Identifier(c)) for c in TOTAL_NAMES)
        query = sql.SQL(
            "WITH k AS (SELECT statement_id, {sums} FROM ({union}) parts GROUP BY statement_id) "
            "SELECT {dim}, {figures}, count(*) OVER () FROM k JOIN {dimension} st "
            "ON st.id = k.statement_id AND st.server_id = %s "
            "WHERE (k.calls <> 0 OR k.plans <> 0 OR k.exec_us <> 0 OR k.plan_us <> 0 OR k.rows <> 0){where} "
            "ORDER BY {key} DESC NULLS LAST, st.id"
        ).format(
            sums=sums,
            union=union,
            dim=_dimension(server_id),
            figures=figures,
            dimension=sql.Identifier(TABLES.STATEMENT.name),
            where=where,
            key=sql.SQL(key),
        )
        return db.fetchall(query, params + [server_id] + fparams)
    narrow = sql.SQL(", ").join(_sum("{c}", " AS {c}", c) for c in (*_RAN, *extra))
    full = sql.SQL(", ").join(_sum("p.{c}", "::int8", c) for c in TOTAL_NAMES)
    query = sql.SQL(
        "WITH parts AS MATERIALIZED ({union}), "
        "k AS (SELECT statement_id, {narrow} FROM parts GROUP BY statement_id), "
        "f AS MATERIALIZED (SELECT k.statement_id, {key} AS key FROM k JOIN {dimension} st "
        "  ON st.id = k.statement_id AND st.server_id = %s "
        "  WHERE (k.calls <> 0 OR k.plans <> 0 OR k.exec_us <> 0 OR k.plan_us <> 0 OR k.rows <> 0){where}), "
        "page AS (SELECT statement_id, key FROM f ORDER BY key DESC NULLS LAST, statement_id LIMIT %s OFFSET %s) "
        "SELECT {dim}, {full}, (SELECT count(*) FROM f) FROM page "
        "JOIN parts p ON p.statement_id = page.statement_id JOIN {dimension} st ON st.id = page.statement_id "
        "GROUP BY st.server_id, st.id, page.key ORDER BY page.key DESC NULLS LAST, st.id"
    ).format(
        union=union,
        narrow=narrow,
        key=sql.SQL(key),
        dimension=sql.Identifier(TABLES.STATEMENT.name),
        where=where,
        dim=_dimension(server_id),
        full=full,
    )
    return db.fetchall(query, params + [server_id] + fparams + [limit, offset])


def _row(r: tuple, planning: Planning) -> StatementTotals:
    sid, queryid, database, user, toplevel, query, text_status, own, *figs = r
    f = dict(zip(TOTAL_NAMES, figs[: len(TOTAL_NAMES)], strict=True))
    tracked = planning.tracked
    return StatementTotals(
        statement_id=sid,
        queryid=queryid,
        database=database,
        user=user,
        toplevel=toplevel,
        query=query,
        text_status=text_status,
        calls=f["calls"],
        plans=f["plans"] if tracked else None,
        exec_ms=f["exec_us"] / 1000.0,
        plan_ms=f["plan_us"] / 1000.0 if tracked else None,
        rows=f["rows"],
        shared_blks_hit=f["shared_blks_hit"],
        shared_blks_read=f["shared_blks_read"],
        temp_blks=f["temp_blks"],
        io_ms=f["io_us"] / 1000.0,
        wal_bytes=f["wal_bytes"],
        own=own,
    )


def _read_window(server_id: int, window: Window) -> tuple[windows.ReadPlan, Sums, parts.ServerTotals]:
    """The plan of a window, its raw edges' per-statement sums, and the server's totals over it."""
    p = windows.plan(window, windows.coverage(server_id))
    raw_totals, raw = parts.read_raw(server_id, p.raw)
    return p, raw, parts.window_totals(server_id, p, raw_totals)


def top_statements(
    *,
    server_id: int,
    window: Window,
    order: str = "total",
    filters: StatementFilters = StatementFilters(),
    page: Page = Page(),
) -> TopStatements:
    """The statements of a server over a window, ordered by `order` (descending), filtered, paged."""
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}: one of {', '.join(ORDERS)}")
    p, raw, totals = _read_window(server_id, window)
    planning = Planning(totals.planning_tracked_s, totals.span_s)
    db_time_us = totals.get("exec_us") + totals.get("plan_us")
    floor_us = None if filters.min_time_share is None else filters.min_time_share * db_time_us
    rows = _aggregate(
        server_id,
        p,
        raw,
        filters=filters,
        order=order,
        limit=page.size,
        offset=(page.number - 1) * page.size,
        min_time_us=floor_us,
    )
    if rows:
        count = rows[0][-1]
    elif page.number > 1:  # past the last page: the count still says how many there are
        count = len(_aggregate(server_id, p, raw, filters=filters, order=order, limit=None, min_time_us=floor_us))
    else:
        count = 0
    return TopStatements(
        window=window,
        read_start=p.start,
        read_end=p.end,
        order=order,
        page=page,
        rows=[_row(r, planning) for r in rows],
        total_count=count,
        planning=planning,
        intervals=totals.snapshots,
        resolutions=tuple(p.resolutions),
        db_time_ms=db_time_us / 1000.0,
    )


def all_statements(*, server_id: int, window: Window) -> tuple[list[StatementTotals], Planning]:
    """Every statement that ran in the window (no paging), for comparisons."""
    p, raw, totals = _read_window(server_id, window)
    planning = Planning(totals.planning_tracked_s, totals.span_s)
    rows = _aggregate(server_id, p, raw, filters=StatementFilters(), order="total", limit=None)
    return [_row(r, planning) for r in rows], planning


# -- one window against another -----------------------------------------------------------------

REGRESSION_MEAN_RATIO = 1.5  # mean time up by more than 50% ...
REGRESSION_MIN_SHARE = 0.01  # ... for a statement with at least 1% of the window's total time


@dataclass(frozen=True)
class StatementChange:
    current: StatementTotals | None  # None: gone (ran in the previous window only)
    previous: StatementTotals | None  # None: new in this window

    @property
    def statement_id(self) -> int:
        return (self.current or self.previous).statement_id

    @property
    def is_new(self) -> bool:
        return self.previous is None

    @property
    def is_gone(self) -> bool:
        return self.current is None

    def change(self, attribute: str) -> float | None:
        """Relative change of a figure (0.5 = +50%); None where either side lacks it or it was 0."""
        if self.current is None or self.previous is None:
            return None
        return parts.relative_change(getattr(self.current, attribute), getattr(self.previous, attribute))


@dataclass(frozen=True)
class WindowComparison:
    window: Window
    previous_window: Window
    changes: list[StatementChange]  # every statement of either window, by current total time
    new: list[StatementChange]
    gone: list[StatementChange]
    regressions: list[StatementChange]  # mean time up > 50% with material total time
    planning: Planning
    previous_planning: Planning
    total_ms: float


def compare_windows(
    *, server_id: int, window: Window, previous: Window | None = None, hide_own: bool = False
) -> WindowComparison:
    """Each statement in `window` against `previous` (default: the same length just before); `hide_own`: the
    console's own statements left out (history.own)."""
    previous = previous or window.previous()
    now_rows, planning = all_statements(server_id=server_id, window=window)
    before_rows, previous_planning = all_statements(server_id=server_id, window=previous)
    if hide_own:
        now_rows, before_rows = [r for r in now_rows if not r.own], [r for r in before_rows if not r.own]
    before = {r.statement_id: r for r in before_rows}
    seen = set()
    changes = []
    for r in now_rows:
        changes.append(StatementChange(r, before.get(r.statement_id)))
        seen.add(r.statement_id)
    changes += [StatementChange(None, r) for r in before_rows if r.statement_id not in seen]
    total_ms = float(sum(r.total_ms for r in now_rows))
    regressions = [
        c
        for c in changes
        if c.current is not None
        and c.previous is not None
        and c.current.calls
        and c.previous.calls
        and (c.current.total_ms / c.current.calls) > REGRESSION_MEAN_RATIO * (c.previous.total_ms / c.previous.calls)
        and total_ms > 0
        and c.current.total_ms >= REGRESSION_MIN_SHARE * total_ms
    ]
    return WindowComparison(
        window=window,
        previous_window=previous,
        changes=changes,
        new=[c for c in changes if c.is_new],
        gone=[c for c in changes if c.is_gone],
        regressions=regressions,
        planning=planning,
        previous_planning=previous_planning,
        total_ms=total_ms,
    )
