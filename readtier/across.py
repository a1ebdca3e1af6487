"""Top statements across several servers (an organization's): each server's top list merged in one
order. Each server is read as top_statements reads it (its own raw edges and tiers), so the cost grows
with the number of servers and with the page: only the first MAX_PAGES pages are offered."""

from __future__ import annotations

from dataclasses import dataclass

from history.public import TABLES
from readtier import db
from readtier.parts import PlanningState
from readtier.statements import MAX_PAGE_SIZE, ORDERS, Page, StatementFilters, StatementTotals
from readtier.statements import top_statements as server_top
from readtier.windows import Window

MAX_PAGES = 10

# order -> the StatementTotals figure it sorts on (descending, None last), as the SQL orders do.
SORT_KEYS: dict[str, str] = {
    "total": "total_ms",
    "exec": "exec_ms",
    "plan": "plan_ms",
    "calls": "calls",
    "mean": "mean_exec_ms",
    "rows": "rows",
    "shared_read": "shared_blks_read",
    "temp": "temp_blks",
    "io": "io_ms",
    "wal": "wal_bytes",
    "plan_share": "plan_share",
}


@dataclass(frozen=True)
class ServerStatement:
    server_id: int
    statement: StatementTotals


@dataclass(frozen=True)
class StatementsAcross:
    window: Window
    order: str
    page: Page
    rows: list[ServerStatement]
    total_count: int  # statements of all the servers that pass the filters
    planning_tracked: bool  # on at least one server, for some of the window
    planning_everywhere: bool  # on every server with data, over the whole window


def _key(order: str, row: ServerStatement) -> tuple:
    value = getattr(row.statement, SORT_KEYS[order])
    # Descending with None last, then by server and statement as the SQL breaks ties.
    return (value is None, -(value or 0), row.server_id, row.statement.statement_id)


def statements_across(
    *,
    server_ids: list[int],
    window: Window,
    order: str = "total",
    filters: StatementFilters = StatementFilters(),
    page: Page = Page(),
) -> StatementsAcross:
    """The statements of several servers over a window in one list, ordered by `order`, filtered, paged."""
    if order not in ORDERS or order not in SORT_KEYS:
        raise ValueError(f"unknown order {order!r}: one of {', '.join(o for o in ORDERS if o in SORT_KEYS)}")
    if page.number > MAX_PAGES or page.number * page.size > MAX_PAGE_SIZE:
        raise ValueError(f"across servers, only the first {MAX_PAGE_SIZE} statements are listed (page {page.number})")
    # Each server's first number * size statements hold the merged page: it cannot reach beyond them.
    wanted = Page(1, page.number * page.size)
    rows: list[ServerStatement] = []
    count = 0
    tracked, everywhere = False, True
    for server_id in server_ids:
        top = server_top(server_id=server_id, window=window, order=order, filters=filters, page=wanted)
        rows += [ServerStatement(server_id, s) for s in top.rows]
        count += top.total_count
        if top.planning.span_s > 0:
            tracked |= top.planning.tracked
            everywhere &= top.planning.state == PlanningState.TRACKED
    rows.sort(key=lambda r: _key(order, r))
    start = (page.number - 1) * page.size
    return StatementsAcross(
        window, order, page, rows[start : start + page.size], count, tracked, tracked and everywhere
    )


def statement_names_across(*, server_ids: list[int]) -> tuple[list[str], list[str]]:
    """(databases, users) the statements of these servers ran under, for filters (one query)."""
    databases, users = db.fetchone(
        "SELECT coalesce(array_agg(DISTINCT database_name ORDER BY database_name), '{}'), "
        f"coalesce(array_agg(DISTINCT user_name ORDER BY user_name), '{{}}') FROM {TABLES.STATEMENT.name} "
        "WHERE server_id = ANY(%s)",
        [list(server_ids)],
    )
    return list(databases), list(users)
