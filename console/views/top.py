"""Top statements of a server, and of all the servers of an organization: a table sorted, filtered and
paged on the server, with its state in the URL, optionally against the previous period. The table is
the fragment "table" of console/top_statements.html; the server page and the organization's page
embed the same fragment."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from math import ceil
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse

from accounts.access import organization_for, server_for
from console.ranges import TimeRange, parse_range
from console.views.common import page_number, range_links, render_page, server_header
from inventory.models import Server
from presentation.formatting import NOT_TRACKED, bytes_text, missing_text, ms_number_text, number_text
from readtier import (
    MAX_PAGES,
    ORDERS,
    Page,
    PlanningState,
    StatementChange,
    StatementFilters,
    StatementTotals,
    statement_names,
    statement_names_across,
    statements_across,
    statements_in,
    top_statements,
)

PAGE_SIZE = 50
TEXT_CHARS = 140  # shown in the table
TITLE_CHARS = 1000  # in the title attribute: the fragment must stay small (texts run up to 64 kB)
# order (readtier.ORDERS) -> (column heading with its unit, the StatementTotals attribute shown)
COLUMNS: dict[str, tuple[str, str]] = {
    "calls": ("Calls", "calls"),
    "total": ("Total time (ms)", "total_ms"),
    "exec": ("Execution (ms)", "exec_ms"),
    "plan": ("Planning (ms)", "plan_ms"),
    "mean": ("Mean exec (ms)", "mean_exec_ms"),
    "rows": ("Rows", "rows"),
    "shared_read": ("Shared read (blocks)", "shared_blks_read"),
    "temp": ("Temp (blocks)", "temp_blks"),
    "io": ("I/O time (ms)", "io_ms"),
    "wal": ("WAL written", "wal_bytes"),  # each cell has its unit (B, kB, MB, GB)
}


@dataclass(frozen=True)
class TableState:
    """The table's part of the URL: ?order=&db=&user=&q=&page=&compare=1&own=1."""

    order: str = "total"
    database: str = ""
    user: str = ""
    text: str = ""
    page: int = 1
    compare: bool = False
    own: bool = False  # the console's own statements (its collections: history.own) are listed too
    error: str = ""  # why a parameter asked for was not used

    def filters(self) -> StatementFilters:
        """The console's own statements are left out unless asked for."""
        return StatementFilters(
            database=self.database or None, user=self.user or None, text=self.text or None, hide_own=not self.own
        )

    def params(self, **changes) -> dict[str, str]:
        values = {
            "order": self.order,
            "db": self.database,
            "user": self.user,
            "q": self.text,
            "page": self.page,
            "compare": "1" if self.compare else "",
            "own": "1" if self.own else "",
        }
        values.update(changes)
        # Defaults stay out of the URL, so that a bookmark reads short.
        return {
            k: str(v)
            for k, v in values.items()
            if v not in ("", None) and not (k == "page" and v == 1) and not (k == "order" and v == "total")
        }


def parse_table(params) -> TableState:
    errors = []
    order = params.get("order") or "total"
    if order not in ORDERS:
        errors.append(f"unknown order {order!r}: one of {', '.join(ORDERS)}")
        order = "total"
    page = page_number(params, errors)
    return TableState(
        order=order,
        database=params.get("db", "").strip(),
        user=params.get("user", "").strip(),
        text=params.get("q", "").strip()[:200],
        page=page,
        compare=params.get("compare") == "1",
        own=params.get("own") == "1",
        error="; ".join(errors),
    )


@dataclass(frozen=True)
class Cell:
    text: str
    css: str = "num"
    change: str = ""  # compare: "+12%" against the previous period
    change_css: str = ""  # up | down


@dataclass(frozen=True)
class TopRow:
    """One statement as the table shows it."""

    s: StatementTotals
    text: str  # the normalized text, or why there is none
    has_text: bool
    is_new: bool  # compare: did not run in the previous period
    cells: list[Cell]  # in the order of COLUMNS, then the plan share
    server: Server | None = None  # across servers: whose statement it is


def figure_text(s: StatementTotals, order: str) -> str | None:
    """A statement's figure as the table writes it (None: planning not tracked)."""
    if order == "plan" and s.plan_ms is None:
        return None
    value = getattr(s, COLUMNS[order][1])
    if order == "wal":
        return bytes_text(value)
    if order == "mean":
        return ms_number_text(value)
    if order in ("total", "exec", "plan", "io"):
        return number_text(value, 1)
    return number_text(value, 0)


def _row(s: StatementTotals, previous: dict[int, StatementTotals] | None, server=None) -> TopRow:
    text = s.query if s.query is not None else missing_text(s.text_status)
    c = StatementChange(s, previous.get(s.statement_id)) if previous is not None else None
    cells = []
    for order, (_, attribute) in COLUMNS.items():
        shown = figure_text(s, order)
        if shown is None:
            cells.append(Cell(NOT_TRACKED, "num not-tracked"))
            continue
        ratio = c.change(attribute) if c is not None else None
        if ratio is None or round(ratio * 100) == 0:
            change, css = ("", "") if ratio is None else ("±0%", "")
        else:
            change, css = f"{ratio * 100:+,.0f}%", "up" if ratio > 0 else "down"
        cells.append(Cell(shown, "num", change, css))
    share = s.plan_share
    cells.append(Cell(NOT_TRACKED, "num not-tracked") if share is None else Cell(f"{share * 100:.1f}"))
    return TopRow(s, text, s.query is not None, c is not None and c.is_new, cells, server)


def _url(base: str, tr: TimeRange, params: dict[str, str]) -> str:
    return base + "?" + urlencode({**tr.params, **params})


def _links(base: str, tr: TimeRange, state: TableState, pages: int) -> dict:
    """Every link of the table, built on `base` (the URL of the page that shows it, so that its state
    stays in that page's URL)."""
    return {
        "columns": [
            (order, label, _url(base, tr, state.params(order=order, page=1))) for order, (label, _) in COLUMNS.items()
        ],
        # The plan share sorts where the selector has the order (plan_us over exec_us + plan_us).
        "share_url": _url(base, tr, state.params(order="plan_share", page=1)) if "plan_share" in ORDERS else "",
        "prev_url": _url(base, tr, state.params(page=state.page - 1)) if state.page > 1 else "",
        "next_url": _url(base, tr, state.params(page=state.page + 1)) if state.page < pages else "",
        "reset_url": _url(base, tr, {}),
        "table_base": base,
        "range_params": tr.params,
        "statement_query": urlencode(tr.params),
    }


def _table(state: TableState, rows: list[TopRow], total_count: int, planning: PlanningState, pages: int, names) -> dict:
    first = (state.page - 1) * PAGE_SIZE + 1
    return {
        "state": state,
        "rows": rows,
        "total_count": total_count,
        "planning": planning,  # tracked | partly tracked | not tracked | no data
        "pages": pages,
        "first_row": first,
        "last_row": first + len(rows) - 1,
        "databases": names[0],
        "users": names[1],
        "text_chars": TEXT_CHARS,
        "title_chars": TITLE_CHARS,
    }


def statements_table(server, tr: TimeRange, state: TableState, base: str) -> dict:
    """The context of the table fragment for one server."""
    top = top_statements(
        server_id=server.pk,
        window=tr.window,
        order=state.order,
        filters=state.filters(),
        page=Page(state.page, PAGE_SIZE),
    )
    previous = None
    coverage = ""
    if state.compare and top.rows:
        before = tr.window.previous()
        previous = statements_in(server_id=server.pk, window=before, statement_ids=[r.statement_id for r in top.rows])
        coverage = _coverage(previous.span_s, before)
    pages = max(1, ceil(top.total_count / PAGE_SIZE))
    names = statement_names(server_id=server.pk)
    rows = [_row(s, previous) for s in top.rows]
    table = _table(state, rows, top.total_count, top.planning.state, pages, (names.databases, names.users))
    return {
        **_links(base, tr, state, pages),
        **table,
        "coverage": coverage,
    }


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:.0f} h" if hours >= 1 else f"{seconds / 60:.0f} min"


def _coverage(span_s: float, before) -> str:
    """A notice when the previous period is only partly covered by history: its changes then compare
    unlike spans and look larger than they are."""
    period_s = (before.end - before.start).total_seconds()
    if period_s <= 0 or span_s >= period_s * 0.95:
        return ""
    if span_s <= 0:
        return f"the previous period has no history in its {_hours(period_s)}: every statement counts as new"
    return (
        f"the previous period has history for {_hours(span_s)} of its {_hours(period_s)}: "
        "changes are larger than they would be over the whole period"
    )


def organization_table(servers: list, tr: TimeRange, state: TableState, base: str) -> dict:
    """The context of the table fragment for every server of an organization (with a server column)."""
    by_id = {s.pk: s for s in servers}
    ids = list(by_id)
    page = min(state.page, MAX_PAGES)
    if page != state.page:
        state = dataclasses.replace(state, page=page, error=f"across servers, the first {MAX_PAGES} pages are listed")
    top = statements_across(
        server_ids=ids,
        window=tr.window,
        order=state.order,
        filters=state.filters(),
        page=Page(page, PAGE_SIZE),
    )
    previous: dict[int, dict[int, StatementTotals]] = {}
    if state.compare:
        wanted: dict[int, list[int]] = {}
        for r in top.rows:
            wanted.setdefault(r.server_id, []).append(r.statement.statement_id)
        for server_id, statement_ids in wanted.items():
            previous[server_id] = statements_in(
                server_id=server_id, window=tr.window.previous(), statement_ids=statement_ids
            )
    rows = [
        _row(
            r.statement,
            previous.get(r.server_id, {}) if state.compare else None,
            by_id[r.server_id],
        )
        for r in top.rows
    ]
    if top.planning_everywhere:
        planning = PlanningState.TRACKED
    else:
        planning = PlanningState.PARTLY_TRACKED if top.planning_tracked else PlanningState.NOT_TRACKED
    pages = max(1, min(MAX_PAGES, ceil(top.total_count / PAGE_SIZE)))
    table = _table(state, rows, top.total_count, planning, pages, statement_names_across(server_ids=ids))
    return {
        **_links(base, tr, state, pages),
        **table,
        "show_server": True,
    }


def range_context(base: str, tr: TimeRange, state: TableState) -> dict:
    """The range picker's context: its links keep the table's state (back to its first page)."""
    return {
        "range": tr,
        "ranges": range_links(base, tr, state.params(page=1)),
        "range_base": base,
        "range_keep": state.params(page=1),
    }


def server_statements(request: HttpRequest, server_id: int) -> HttpResponse:
    """/servers/<id>/statements/: the table alone (htmx), or a page with the server's head and the table."""
    server = server_for(request.user, server_id)
    tr = parse_range(request.GET)
    state = parse_table(request.GET)
    base = reverse("server-statements", args=[server.pk])
    context = {**server_header(server), **range_context(base, tr, state), **statements_table(server, tr, state, base)}
    return render_page(request, "console/top_statements.html", context, fragment="table")


def organization_statements(request: HttpRequest, organization_id: int) -> HttpResponse:
    """/organizations/<id>/statements/: the top statements of all the organization's servers in one table."""
    organization = organization_for(request.user, organization_id)
    servers = list(Server.objects.filter(organization=organization).order_by("name"))
    tr = parse_range(request.GET)
    state = parse_table(request.GET)
    base = reverse("organization-statements", args=[organization.pk])
    context = {
        "organization": organization,
        "servers": servers,
        "max_pages": MAX_PAGES,
        **range_context(base, tr, state),
        **organization_table(servers, tr, state, base),
    }
    return render_page(request, "console/organization_statements.html", context, fragment="table")


urlpatterns = [
    path("servers/<int:server_id>/statements/", server_statements, name="server-statements"),
    path("organizations/<int:organization_id>/statements/", organization_statements, name="organization-statements"),
]
