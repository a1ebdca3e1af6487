"""The statement page: one statement's normalized text (highlighted, escaped: texts come from monitored
servers), its database, user and first and last seen, its figures and charts over a time range, the
wait events of its query_id (PostgreSQL 14+), and the same queryid on the organization's other servers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path, reverse

from accounts.access import server_for, visible_organization_ids
from console.charts import (
    Chart,
    Series,
    calls_chart,
    hit_ratio_chart,
    split_chart,
    time_axis,
    time_chart,
)
from console.ranges import parse_range
from console.sql_highlight import highlight
from console.views.common import is_fragment_request, range_links, render_page, server_header
from history.public import TextStatus
from presentation.formatting import NOT_TRACKED, ms_number_text, number_text
from readtier import (
    PlanChangeRow,
    StatementSeries,
    StatementTotals,
    Window,
    history_coverage,
    plan_changes,
    same_queryid_elsewhere,
    statement_detail_of,
    statement_series,
    statements_in,
    wait_events,
)

WAITS_BY_QUERY_FROM = 140000  # query_id in pg_stat_activity and pg_wait_sampling: PostgreSQL 14
TOP_WAITS = 10
# Why a statement has no text, and what would bring it (never a blank).
NO_TEXT_EXPLAINED: dict[str, tuple[str, str]] = {
    TextStatus.NOT_VISIBLE: (
        "Its text is not visible to the monitoring role.",
        "Grant it pg_read_all_stats to read the texts of other roles' statements.",
    ),
    TextStatus.EVICTED: (
        "Its text was evicted before it could be read.",
        "pg_stat_statements dropped the entry (pg_stat_statements.max is full); the text is read "
        "again when the statement comes back.",
    ),
    TextStatus.UNAVAILABLE: (
        "Its text is unavailable: pg_stat_statements did not keep it.",
        "Its query text file was discarded (e.g. after a failed garbage collection); the text "
        "is read again when the entry is re-created.",
    ),
    TextStatus.PENDING: (
        "Its text has not been read yet.",
        "The server had more new statements than one snapshot reads texts for "
        "(COLLECTOR_TEXTS_PER_SNAPSHOT, COLLECTOR_TEXT_BYTES_PER_SNAPSHOT); the next snapshots "
        "read it first.",
    ),
}


def planning_note(series: StatementSeries) -> str:
    """What the charts cannot show about planning ("" where it was tracked wherever there is data)."""
    states = {p.planning_tracked for p in series.points if p.planning_tracked is not None}
    if states == {False}:
        return "planning not tracked (pg_stat_statements.track_planning was off)"
    if False in states:
        return "planning not tracked for part of the range (no planning time is drawn there)"
    return ""


def plan_markers(changes: list[PlanChangeRow]) -> list[tuple[datetime, str]]:
    """One marker per plan change, "new plan" on the chart (a chart's width holds no more); the page names each
    under the charts as the regression alert does ("the plan changed from … to …")."""
    return [(c.at, "new plan") for c in changes]


def statement_charts(series: StatementSeries, window: Window, markers: list[tuple[datetime, str]] = ()) -> list[Chart]:
    """The five charts of the statement page from one StatementSeries (None stays a gap), each plan change marked
    as the server page marks its configuration changes."""
    points = series.points
    common = time_axis(points, (window.start, window.end), markers)
    note = planning_note(series)
    plan_label = "planning (not tracked)" if note.startswith("planning not tracked (") else "planning"
    temp_per_s = [p.temp_blks / p.span_s if p.span_s and p.temp_blks is not None else None for p in points]
    return [
        calls_chart([p.calls_per_s for p in points], **common),
        split_chart(
            "chart-mean",
            "Mean time per call, execution and planning",
            [p.mean_exec_ms for p in points],
            [p.mean_plan_ms for p in points],
            unit="ms",
            plan_label=plan_label,
            note=note,
            **common,
        ),
        Chart(
            "chart-rows",
            "Rows per call",
            time_chart(
                series=[Series("rows/call", [p.rows_per_call for p in points], "#3c9a5f")], unit="rows", **common
            ),
        ),
        hit_ratio_chart([p.hit_ratio for p in points], **common),
        Chart(
            "chart-temp",
            "Temporary blocks per second (read + written)",
            time_chart(series=[Series("temp blocks/s", temp_per_s, "#b3261e")], unit="blocks/s", **common),
        ),
    ]


@dataclass(frozen=True)
class StatementFigure:
    label: str  # with its unit
    text: str
    not_tracked: bool = False


def range_figures(s: StatementTotals) -> list[StatementFigure]:
    """The statement's sums over the range as the page writes them (planning: "not tracked", never 0)."""

    def planning(label: str, text: str) -> StatementFigure:
        return StatementFigure(label, text) if s.plan_ms is not None else StatementFigure(label, NOT_TRACKED, True)

    share = s.plan_share
    return [
        StatementFigure("Calls", number_text(s.calls, 0)),
        StatementFigure("Total time (ms)", number_text(s.total_ms, 1)),
        StatementFigure("Execution (ms)", number_text(s.exec_ms, 1)),
        StatementFigure("Mean execution (ms)", ms_number_text(s.mean_exec_ms)),
        planning("Planning (ms)", number_text(s.plan_ms, 1)),
        planning("Plans", number_text(s.plans, 0)),
        planning("Mean planning (ms)", ms_number_text(s.mean_plan_ms)),
        planning("Plan share (%)", number_text(None if share is None else share * 100, 1)),
        StatementFigure("Rows", number_text(s.rows, 0)),
        StatementFigure("Rows per call", number_text(s.rows_per_call, 2)),
        StatementFigure(
            "Shared buffer hit ratio (%)", number_text(None if s.hit_ratio is None else s.hit_ratio * 100, 2)
        ),
        StatementFigure("Shared blocks read", number_text(s.shared_blks_read, 0)),
        StatementFigure("Temp blocks (read + written)", number_text(s.temp_blks, 0)),
        StatementFigure("I/O time (ms)", number_text(s.io_ms, 1)),
        StatementFigure("WAL (bytes)", number_text(s.wal_bytes, 0)),
    ]


def statement(request: HttpRequest, statement_id: int) -> HttpResponse:
    """/statements/<id>/: the whole page, or for an htmx request the range-dependent body."""
    user = request.user
    organizations = visible_organization_ids(user)
    try:
        detail = statement_detail_of(statement_id=statement_id, organization_ids=organizations)
    except LookupError:
        raise Http404("no such statement") from None
    server = server_for(user, detail.server_id)  # the same rule as every server page
    tr = parse_range(request.GET, history_from=history_coverage(server.pk).data_from)
    base = reverse("statement", args=[detail.statement_id])
    series = statement_series(statement_id=detail.statement_id, window=tr.window)
    totals = statements_in(server_id=server.pk, window=tr.window, statement_ids=[detail.statement_id])
    changes = plan_changes(server_id=server.pk, window=tr.window, statement_ids=[detail.statement_id])
    version = server.server_version_num
    waits = None
    if version is not None and version >= WAITS_BY_QUERY_FROM:
        waits = wait_events(server_id=server.pk, window=tr.window, statement_id=detail.statement_id, top=TOP_WAITS)
    missing = NO_TEXT_EXPLAINED.get(detail.text_status, ("Its text is not known.", ""))
    header = server_header(server)
    if waits is not None:
        waits_need = ""
    elif version is None:
        waits_need = "wait events by query need PostgreSQL 14 (this server's version is not known yet)"
    else:
        waits_need = f"wait events by query need PostgreSQL 14 (this server runs {header['version']})"
    context = {
        **header,
        "detail": detail,
        "query_html": highlight(detail.query) if detail.query is not None else None,
        "missing_text": missing[0],
        "missing_hint": missing[1],
        "range": tr,
        "ranges": range_links(base, tr, {}),
        "range_base": base,
        "range_keep": {},
        "statement_query": urlencode(tr.params),
        "series": series,
        "charts": statement_charts(series, tr.window, plan_markers(changes)),
        "plan_changes": changes,
        "totals": totals.get(detail.statement_id),
        "figures": range_figures(totals[detail.statement_id]) if detail.statement_id in totals else [],
        "waits": waits,
        # share of the query_id's sampled session time, in percent
        "wait_rows": [(w, None if w.share is None else w.share * 100) for w in waits.rows] if waits else [],
        "waits_need": waits_need,
    }
    if not is_fragment_request(request):  # outside the range-dependent body
        context["elsewhere"] = same_queryid_elsewhere(
            statement_id=detail.statement_id, organization_id=detail.organization_id
        )
    return render_page(request, "console/statement.html", context, fragment="body")


urlpatterns = [path("statements/<int:statement_id>/", statement, name="statement")]
